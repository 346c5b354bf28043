import type { Logger } from "@dbaas/kit";

export interface CapturedLine {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

/** A Logger that keeps its lines for assertions. */
export function captureLog(): Logger & { lines: CapturedLine[] } {
  const lines: CapturedLine[] = [];
  const make = (base: Record<string, unknown>): Logger => ({
    info: (msg, fields) => void lines.push({ level: "info", msg, fields: { ...base, ...fields } }),
    warn: (msg, fields) => void lines.push({ level: "warn", msg, fields: { ...base, ...fields } }),
    error: (msg, fields) => void lines.push({ level: "error", msg, fields: { ...base, ...fields } }),
    child: (fields) => make({ ...base, ...fields }),
  });
  return Object.assign(make({}), { lines });
}
