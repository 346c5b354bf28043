/**
 * What makes an answer a failure: a 5xx, no answer at all, a 4xx without the
 * error envelope (or without X-Request-Id matching `meta.request_id`), or a
 * body that shows a stack trace or other internal detail.
 */

export interface Observed {
  status: number;
  /** Lower-cased names. */
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface Problem {
  /** Short and stable, for grouping: "5xx", "no answer", "4xx without envelope", "leak: SQL error", … */
  kind: string;
  detail: string;
}

/** Internal detail no answer may show. Only patterns input from the fuzz never contains (see values.ts). */
const LEAKS: ReadonlyArray<readonly [string, RegExp, "errors" | "all"]> = [
  ["stack frame", /\n\s+at \S/, "all"],
  ["stack frame", /\bat (?:async )?(?:[\w$.<>[\]]+ )?\(?(?:file:\/\/|node:|\/)[^\s)]*:\d+:\d+\)?/, "all"],
  ["source location", /\.(?:ts|js|mjs|cjs):\d+/, "all"],
  ["node_modules", /node_modules/, "all"],
  [
    "ConnectError",
    /ConnectError|\[(?:canceled|unknown|invalid_argument|deadline_exceeded|not_found|already_exists|permission_denied|resource_exhausted|failed_precondition|aborted|out_of_range|unimplemented|internal|unavailable|data_loss|unauthenticated)\]/,
    "all",
  ],
  [
    "SQL error",
    /violates|syntax error|duplicate key|invalid byte sequence|invalid input syntax|null value in column|deadlock detected|SQLSTATE|current transaction is aborted|\brelation "|\bcolumn "/i,
    "all",
  ],
  ["JS error", /\b(?:TypeError|ReferenceError|RangeError|SyntaxError)\b|Cannot read propert|is not a function|Maximum call stack/, "all"],
  ["parser message", /in JSON at position|Unexpected token|Unexpected end of JSON|Bad control character/, "all"],
  ["internal address", /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|\b127\.0\.0\.1:\d+|\blocalhost:\d+|\bh2c?:\/\//, "errors"],
];

const header = (h: Observed["headers"], name: string) => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Bodies that are documents of their own (the OpenAPI description, the rendered docs and their assets). */
function isDocument(path: string, status: number, contentType: string): boolean {
  if (status >= 300) return false;
  return path.startsWith("/v1/openapi.json") || !contentType.includes("application/json");
}

export function judge(method: string, path: string, res: Observed, publicCodes: ReadonlySet<string>): Problem[] {
  const problems: Problem[] = [];
  const text = res.body.toString("utf8");
  const contentType = header(res.headers, "content-type") ?? "";
  const requestId = header(res.headers, "x-request-id");
  if (res.status >= 500) problems.push({ kind: "5xx", detail: `${res.status} ${text.slice(0, 300)}` });
  if (requestId === undefined || requestId === "") problems.push({ kind: "no X-Request-Id", detail: `${res.status}` });
  if (res.status >= 400 && method !== "HEAD") {
    const envelope = parseEnvelope(text);
    if (typeof envelope === "string") {
      problems.push({ kind: "4xx without envelope", detail: `${res.status} ${envelope}: ${JSON.stringify(text.slice(0, 200))}` });
    } else {
      if (!contentType.startsWith("application/json"))
        problems.push({ kind: "4xx without envelope", detail: `content-type ${JSON.stringify(contentType)}` });
      if (envelope.meta.request_id !== requestId)
        problems.push({ kind: "request id mismatch", detail: `header ${requestId}, body ${envelope.meta.request_id}` });
      if (publicCodes.size > 0 && !publicCodes.has(envelope.error.code))
        problems.push({ kind: "undocumented error code", detail: envelope.error.code });
    }
  }
  if (!isDocument(path, res.status, contentType)) {
    for (const [kind, pattern, where] of LEAKS) {
      if (where === "errors" && res.status < 400) continue;
      const m = pattern.exec(text);
      if (m) {
        problems.push({
          kind: `leak: ${kind}`,
          detail: `${res.status} …${JSON.stringify(text.slice(Math.max(0, m.index - 80), m.index + 120))}…`,
        });
        break;
      }
    }
  }
  return problems;
}

interface Envelope {
  error: { code: string; message: string; details: unknown[] };
  meta: { request_id: string };
}

/** The envelope, or what is wrong with it. */
function parseEnvelope(text: string): Envelope | string {
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return text === "" ? "empty body" : "not JSON";
  }
  const e = body?.error;
  if (typeof e !== "object" || e === null) return "no error object";
  if (typeof e.code !== "string" || typeof e.message !== "string" || !Array.isArray(e.details))
    return "error without code, message or details";
  if (typeof body.meta?.request_id !== "string") return "no meta.request_id";
  return body as Envelope;
}
