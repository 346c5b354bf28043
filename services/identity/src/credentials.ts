import { createHash, randomInt } from "node:crypto";
import { crc32 } from "node:zlib";

/**
 * Bearer secrets: login tokens (`dbs_…`) and API keys (`dbk_…`). Both are
 * high-entropy random strings, so a fast SHA-256 is the right stored form
 * (a slow hash only matters for guessable secrets such as passwords).
 *
 * API keys follow GitHub's token format: a recognisable prefix for secret
 * scanners, and a CRC32 checksum of the random part so a mistyped or invented
 * key is refused before any database lookup.
 */
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SESSION_PREFIX = "dbs_";
const SESSION_RANDOM_LENGTH = 43;
const API_KEY_PREFIX = "dbk_";
const INVITATION_PREFIX = "dbi_";
const API_KEY_RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;

const SESSION_PATTERN = new RegExp(`^${SESSION_PREFIX}[0-9A-Za-z]{${SESSION_RANDOM_LENGTH}}$`);
const INVITATION_PATTERN = new RegExp(`^${INVITATION_PREFIX}[0-9A-Za-z]{${SESSION_RANDOM_LENGTH}}$`);
const API_KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}([0-9A-Za-z]{${API_KEY_RANDOM_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`);

/** How many characters of an API key are kept in clear to tell keys apart. */
export const API_KEY_DISPLAY_PREFIX_LENGTH = 8;

function randomBase62(length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

function base62Fixed(n: number, width: number): string {
  let out = "";
  for (let v = n; v > 0; v = Math.floor(v / 62)) out = BASE62[v % 62] + out;
  return out.padStart(width, "0");
}

function checksum(randomPart: string): string {
  return base62Fixed(crc32(randomPart), CHECKSUM_LENGTH);
}

export function newSessionToken(): string {
  return SESSION_PREFIX + randomBase62(SESSION_RANDOM_LENGTH);
}

/** The one-time token of an invitation link (256 bits of randomness like a login token). */
export function newInvitationToken(): string {
  return INVITATION_PREFIX + randomBase62(SESSION_RANDOM_LENGTH);
}

export function isInvitationToken(value: string): boolean {
  return INVITATION_PATTERN.test(value);
}

export function newApiKeySecret(): string {
  const random = randomBase62(API_KEY_RANDOM_LENGTH);
  return API_KEY_PREFIX + random + checksum(random);
}

export type BearerKind = "session" | "api_key";

/**
 * What a bearer string claims to be, judged from its shape (and, for API keys,
 * its checksum) alone; undefined when it cannot be a credential we issued.
 */
export function classifyBearer(bearer: string): BearerKind | undefined {
  if (SESSION_PATTERN.test(bearer)) return "session";
  const key = API_KEY_PATTERN.exec(bearer);
  if (key && checksum(key[1]!) === key[2]) return "api_key";
  return undefined;
}

/** The stored form of a bearer secret. */
export function hashSecret(secret: string): Buffer {
  return createHash("sha256").update(secret).digest();
}
