/**
 * The bounds of every string a client may send, in one place: the gateway
 * publishes them (`maxLength`, `minLength`, `pattern` in /v1/openapi.json) and
 * validates with them, and the services enforce them again, because internal
 * callers do not pass through the gateway. Lengths count Unicode code points,
 * as JSON Schema's `minLength`/`maxLength` do, after trimming where a field is
 * trimmed (names, e-mail addresses).
 */

/** An e-mail address (RFC 5321's path limit). */
export const EMAIL_MAX_LENGTH = 254;

/** Passwords: a floor against guessing, a cap so hashing a request stays cheap. */
export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 256;

/** A database's name (docs/product.md, Databases: 3–63 characters after trimming). */
export const DATABASE_NAME_MIN_LENGTH = 3;
export const DATABASE_NAME_MAX_LENGTH = 63;

/** The other free-text names: a user's, an organization's, an API key's. */
export const NAME_MIN_LENGTH = 1;
export const NAME_MAX_LENGTH = 100;

/** An identifier of ours (`db-…`, `org-…`, `usr-…`, `pm-…`): far longer than any we mint. */
export const ID_MAX_LENGTH = 128;

/** A secret or opaque token a client hands back (invitation token, processor token, bearer credential). */
export const TOKEN_MAX_LENGTH = 512;

/**
 * Characters no name may hold: control (Cc, including CR, LF and NUL), format
 * (Cf: bidi overrides and isolates, zero-width characters, U+FEFF), surrogate
 * code units standing alone (Cs), the line and paragraph separators (U+2028,
 * U+2029), and U+FFFD, which is what a lone surrogate or invalid UTF-8 turns
 * into on the protobuf wire. They make a name display as something it is not.
 */
export const FORBIDDEN_NAME_CHARACTERS = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\uFFFD]/u;

/**
 * The same rule as a JSON Schema `pattern` (ECMA-262 with the `u` flag, as ajv
 * compiles it): the whole value free of FORBIDDEN_NAME_CHARACTERS.
 */
export const NAME_PATTERN = "^[^\\p{Cc}\\p{Cf}\\p{Cs}\\p{Zl}\\p{Zp}\\uFFFD]*$";

/** Length in Unicode code points, the unit of every limit above. */
export function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}
