/** A small structured logger: one JSON line per event on stdout/stderr. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

// Field names whose values must never reach a log line.
const SECRET_KEYS = /pass(word)?|secret|token|authorization|verifier|api_?key/i;

function redact(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (SECRET_KEYS.test(k)) out[k] = "[redacted]";
    else if (v instanceof Error) out[k] = v.message;
    else out[k] = v;
  }
  return out;
}

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

/** Creates a logger writing the levels `LOG_LEVEL` lets through (tests run with `silent`). */
export function createLogger(service: string, base: Record<string, unknown> = {}): Logger {
  const least = SEVERITY[logLevel()];
  const write = (level: Exclude<LogLevel, "silent">, msg: string, fields?: Record<string, unknown>) => {
    if (SEVERITY[level] < least) return;
    const line = JSON.stringify({
      time: new Date().toISOString(),
      level,
      service,
      msg,
      ...redact({ ...base, ...fields }),
    });
    (level === "error" ? process.stderr : process.stdout).write(line + "\n");
  };
  return {
    info: (msg, fields) => write("info", msg, fields),
    warn: (msg, fields) => write("warn", msg, fields),
    error: (msg, fields) => write("error", msg, fields),
    child: (fields) => createLogger(service, { ...base, ...fields }),
  };
}
