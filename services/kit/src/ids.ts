import { randomBytes } from "node:crypto";

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/** Random lowercase alphanumeric string (DNS-label safe), uniformly distributed. */
export function randomToken(length: number, alphabet = ALPHABET): string {
  // Reject bytes above the largest multiple of the alphabet size to avoid modulo bias.
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < limit) out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A new identifier with the public prefix of its resource, e.g. `db-k3x9…`. */
export function newId(prefix: string): string {
  return `${prefix}-${randomToken(16)}`;
}
