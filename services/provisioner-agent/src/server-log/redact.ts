/**
 * What the agent hands out of a server's log never carries a secret (docs/product.md, Inside the database): the log is
 * read by every member with metrics:read, viewers included, while a statement can carry a role's password
 * (`ALTER ROLE … PASSWORD '…'` failing, or logged by a customer's `log_min_duration_statement`), a verifier, or a key
 * given to pgcrypto. PostgreSQL masks none of it, so an entry whose text mentions one has every literal in every text
 * field masked; verifiers and md5 hashes are masked wherever they appear.
 */

/** Words that mark a statement or message as possibly carrying a secret. */
const SECRET_HINT =
  /passw|secret|scram-sha-256\$|md5[0-9a-f]{32}|pgp_(?:sym|pub)_|encrypt|decrypt|\bcrypt\s*\(|\bhmac\s*\(|api[_-]?key|token|credential|private[_ ]key|\bkey\s*=/i;

const MASK = "[redacted]";

/** Always masked, whatever the rest says. */
const VERIFIERS = [/SCRAM-SHA-256\$[^\s'",;)]+/g, /\bmd5[0-9a-f]{32}\b/g];

/** Literals of a statement or a message: '…' (E'…' too), $tag$…$tag$, an unterminated '… at the end, `near "…"`. */
const LITERALS: readonly [RegExp, string][] = [
  [/\$([A-Za-z_][A-Za-z0-9_]*)?\$[\s\S]*?\$\1\$/g, `$$$$${MASK}$$$$`],
  // One pass: a complete literal, or one cut short at the end of the text (a statement cut at 8 KiB).
  [/'(?:[^']|'')*(?:'|$)/g, `'${MASK}'`],
  [/(\bnear\s+)"(?:[^"]|"")*"/gi, `$1"${MASK}"`],
  [/(\bpassword\s+)(?!')([^\s;,)]+)/gi, `$1${MASK}`],
  [/(\bparameters:\s)[\s\S]*/gi, `$1${MASK}`],
];

export function maskVerifiers(text: string): string {
  let out = text;
  for (const re of VERIFIERS) out = out.replace(re, MASK);
  return out;
}

export function maskLiterals(text: string): string {
  let out = text;
  for (const [re, by] of LITERALS) out = out.replace(re, by);
  return out;
}

/** Whether any of `texts` hints at a secret. */
export const mentionsSecret = (texts: readonly string[]): boolean => texts.some((t) => t !== "" && SECRET_HINT.test(t));

/**
 * `fields` with secrets masked: verifiers everywhere, and when any field hints at a secret, every literal of every
 * field. Keys are kept.
 */
export function redactFields<T extends Record<string, string>>(fields: T): T {
  const secret = mentionsSecret(Object.values(fields));
  const out = {} as Record<string, string>;
  for (const [k, v] of Object.entries(fields)) out[k] = v === "" ? v : secret ? maskLiterals(maskVerifiers(v)) : maskVerifiers(v);
  return out as T;
}
