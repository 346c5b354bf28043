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

/** Creates a logger; `LOG_LEVEL=silent` mutes info (tests). */
export function createLogger(service: string, base: Record<string, unknown> = {}): Logger {
  const silent = process.env.LOG_LEVEL === "silent";
  const write = (level: string, msg: string, fields?: Record<string, unknown>) => {
    if (silent && level === "info") return;
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
