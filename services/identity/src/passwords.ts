import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

/**
 * Password hashing with scrypt, stored as `scrypt$N$r$p$salt$hash` (base64) so
 * the cost can be raised later without breaking existing hashes.
 */
export const DEFAULT_SCRYPT_N = 2 ** 17;
const R = 8;
const P = 1;
const SALT_BYTES = 16;
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  // scrypt needs 128·N·r bytes; node's default ceiling (32 MiB) is below that at N=2^17.
  const options: ScryptOptions = { N: n, r, p, maxmem: 256 * n * r };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

interface Parsed {
  n: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

function parse(stored: string): Parsed | undefined {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return undefined;
  const [n, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![n, r, p].every((v) => Number.isInteger(v) && v > 0)) return undefined;
  return { n, r, p, salt: Buffer.from(parts[4]!, "base64"), hash: Buffer.from(parts[5]!, "base64") };
}

export interface PasswordVerdict {
  ok: boolean;
  /** The hash was made with other parameters than the current ones: store a fresh one. */
  needsRehash: boolean;
}

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(password: string, stored: string): Promise<PasswordVerdict>;
  /**
   * Spends the same work as `verify` and fails: used when no user has the given
   * e-mail, so response time does not reveal which e-mails are registered.
   */
  verifyNobody(password: string): Promise<PasswordVerdict>;
}

export function createPasswordHasher(n = DEFAULT_SCRYPT_N): PasswordHasher {
  let decoy: Promise<string> | undefined;
  const hasher: PasswordHasher = {
    async hash(password) {
      const salt = randomBytes(SALT_BYTES);
      const key = await derive(password, salt, n, R, P);
      return `scrypt$${n}$${R}$${P}$${salt.toString("base64")}$${key.toString("base64")}`;
    },
    async verify(password, stored) {
      const parsed = parse(stored);
      if (!parsed) return { ok: false, needsRehash: false };
      const key = await derive(password, parsed.salt, parsed.n, parsed.r, parsed.p);
      const ok = key.length === parsed.hash.length && timingSafeEqual(key, parsed.hash);
      return { ok, needsRehash: parsed.n !== n || parsed.r !== R || parsed.p !== P };
    },
    async verifyNobody(password) {
      decoy ??= hasher.hash(randomBytes(16).toString("hex"));
      await hasher.verify(password, await decoy);
      return { ok: false, needsRehash: false };
    },
  };
  return hasher;
}
