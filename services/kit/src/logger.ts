import pino from "pino";

/**
 * Structured logging on pino: one JSON line per event, info and warn on stdout, error on stderr,
 * with the fields every reader of our lines expects (`time` ISO 8601, `level` as a word, `service`,
 * `msg`, then the event's own fields; an Error field is its message).
 */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/**
 * Field names whose values never reach a log line, written as `[redacted]`: passwords, tokens,
 * secrets and keys, authorization headers, SCRAM verifiers. Matched by name (pino's redaction
 * paths, not a pattern), at the top level of an event and one object down (`headers.authorization`,
 * `config.secretKey`): a new field that carries a secret is added here.
 */
export const REDACTED_FIELDS: readonly string[] = [
  "password",
  "new_password",
  "newPassword",
  "passwd",
  "secret",
  "secret_key",
  "secretKey",
  "client_secret",
  "internal_secret",
  "internalSecret",
  "token",
  "access_token",
  "accessToken",
  "refresh_token",
  "refreshToken",
  "id_token",
  "authorization",
  "cookie",
  "x-dbaas-internal-auth",
  "verifier",
  "scram_verifier",
  "scramVerifier",
  "password_verifier",
  "api_key",
  "apiKey",
];

const REDACT_PATHS = REDACTED_FIELDS.flatMap((name) => {
  const key = /^[A-Za-z_$][\w$]*$/.test(name) ? name : `["${name}"]`;
  return [key, key.startsWith("[") ? `*${key}` : `*.${key}`];
});

/** `LOG_LEVEL`: the least severe level written; `silent` writes nothing at all. */
export type LogLevel = "info" | "warn" | "error" | "silent";

const SEVERITY: Record<LogLevel, number> = { info: 0, warn: 1, error: 2, silent: 3 };

/** The level `LOG_LEVEL` names (unset or unknown: info, so a typo never hides errors). */
export function logLevel(env: Record<string, string | undefined> = process.env): LogLevel {
  const value = env.LOG_LEVEL?.trim().toLowerCase();
  return value !== undefined && Object.hasOwn(SEVERITY, value) ? (value as LogLevel) : "info";
}

/** Whether a logger made under `env` writes lines of `level`. */
export function logs(level: Exclude<LogLevel, "silent">, env: Record<string, string | undefined> = process.env): boolean {
  return SEVERITY[level] >= SEVERITY[logLevel(env)];
}

/** Errors among an event's fields as their messages (a stack or a cause is not for the log line). */
function errorsAsMessages(fields: Record<string, unknown>): Record<string, unknown> {
  if (!Object.values(fields).some((v) => v instanceof Error)) return fields;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) out[k] = v instanceof Error ? v.message : v;
  return out;
}

function wrap(p: pino.Logger): Logger {
  // Fields first, then the message, and nothing after it: pino would read `%s` in a message as a placeholder.
  return {
    info: (msg, fields) => p.info(fields ?? {}, msg),
    warn: (msg, fields) => p.warn(fields ?? {}, msg),
    error: (msg, fields) => p.error(fields ?? {}, msg),
    child: (fields) => wrap(p.child(fields)),
  };
}

/** Creates a logger writing the levels `LOG_LEVEL` lets through (tests run with `silent`). */
export function createLogger(service: string, base: Record<string, unknown> = {}): Logger {
  // process.stdout itself, not a file descriptor: its write is looked up on each line (tests capture it there).
  const streams = pino.multistream(
    [
      { level: "info", stream: process.stdout },
      { level: "error", stream: process.stderr },
    ],
    { dedupe: true },
  );
  const p = pino(
    {
      level: logLevel(),
      base: { service, ...base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        bindings: errorsAsMessages,
        log: errorsAsMessages,
      },
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    },
    streams,
  );
  return wrap(p);
}
