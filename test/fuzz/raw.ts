/**
 * Malformed HTTP over raw sockets (no client library sends any of it): each
 * template with random variations. Every one must get an answer — the error
 * envelope for a 4xx — and a pipelined or smuggled second request must not
 * be answered as if it were well-formed.
 */
import { connect } from "node:net";
import type { Observed } from "./oracle.ts";
import type { Rng } from "./prng.ts";

export interface RawRequest {
  index: number;
  template: string;
  bytes: Buffer;
  /** Sent after a pause (a body arriving late), when set. */
  later?: Buffer;
}

const CTL = [...Array.from({ length: 32 }, (_, i) => i).filter((i) => i !== 9 && i !== 10 && i !== 13), 127];

type Template = (rng: Rng, auth: string) => { bytes: Buffer | string; later?: Buffer | string };
const line = (method: string, target: string, version = "HTTP/1.1") => `${method} ${target} ${version}\r\n`;
const hostAnd = (...headers: string[]) => ["Host: gw", ...headers].map((h) => `${h}\r\n`).join("") + "\r\n";

const TEMPLATES: Record<string, Template> = {
  "control character in a header value": (rng, auth) => ({
    bytes: Buffer.concat([
      Buffer.from(line("GET", "/v1/regions") + `Authorization: ${auth}\r\nX-Note: a`),
      Buffer.from([rng.pick(CTL)]),
      Buffer.from("b\r\nHost: gw\r\n\r\n"),
    ]),
  }),
  "control character in a header name": (rng) => ({
    bytes: Buffer.concat([
      Buffer.from(line("GET", "/v1/regions") + "X-No"),
      Buffer.from([rng.pick(CTL)]),
      Buffer.from("te: b\r\nHost: gw\r\n\r\n"),
    ]),
  }),
  "odd HTTP version": (rng) => ({
    bytes:
      line("GET", "/v1/regions", rng.pick(["HTTP/9.9", "HTTP/2.0", "HTTP/3", "HTTX/1.1", "http/1.1", "HTTP/1.1.1", "HTTP/01.1", "HTTP/"])) +
      hostAnd(),
  }),
  "Content-Length with Transfer-Encoding": (rng) => ({
    bytes:
      line("POST", "/v1/auth/token") +
      hostAnd("Content-Type: application/json", `Content-Length: ${rng.between(0, 40)}`, "Transfer-Encoding: chunked") +
      "2\r\n{}\r\n0\r\n\r\n",
  }),
  "odd Transfer-Encoding": (rng) => ({
    bytes:
      line("POST", "/v1/auth/token") +
      hostAnd(
        "Content-Type: application/json",
        `Transfer-Encoding: ${rng.pick(["xchunked", "chunked, identity", "identity", "gzip", "chunked\x0b", " chunked", "chunked, chunked"])}`,
      ) +
      "2\r\n{}\r\n0\r\n\r\n",
  }),
  "bad chunk size": (rng, auth) => ({
    bytes:
      line("POST", rng.pick(["/v1/auth/token", "/v1/databases"])) +
      hostAnd(`Authorization: ${auth}`, "Content-Type: application/json", "Transfer-Encoding: chunked"),
    later: `${rng.pick(["zz", "-1", "ffffffffffffffffffff", "1 2", "0x2", "", "2;" + "e".repeat(20_000)])}\r\n{}\r\n0\r\n\r\n`,
  }),
  "chunk without its CRLF": () => ({
    bytes: line("POST", "/v1/auth/token") + hostAnd("Content-Type: application/json", "Transfer-Encoding: chunked"),
    later: "2\r\n{}XX0\r\n\r\n",
  }),
  "raw non-ASCII path": (rng) => ({
    bytes: Buffer.concat([
      Buffer.from("GET /v1/databases/"),
      Buffer.from(Array.from({ length: rng.between(1, 6) }, () => rng.between(0x80, 0xff))),
      Buffer.from(" HTTP/1.1\r\n" + hostAnd()),
    ]),
  }),
  "raw control character in the path": (rng) => ({
    bytes: Buffer.concat([
      Buffer.from("GET /v1/databases/db-"),
      Buffer.from([rng.pick([0, 1, 8, 0x1b, 0x7f])]),
      Buffer.from(" HTTP/1.1\r\n" + hostAnd()),
    ]),
  }),
  "headers over 16 KB": (rng) => {
    const kind = rng.int(3);
    if (kind === 0) return { bytes: line("GET", "/v1/regions") + hostAnd(`X-Big: ${"a".repeat(rng.between(17_000, 70_000))}`) };
    if (kind === 1)
      return { bytes: line("GET", "/v1/regions") + hostAnd(...Array.from({ length: 1200 }, (_, i) => `X-H${i}: ${"v".repeat(10)}`)) };
    return { bytes: line("GET", `/v1/${"a".repeat(rng.between(17_000, 40_000))}`) + hostAnd() };
  },
  "HTTP/1.1 without Host": () => ({ bytes: line("GET", "/v1/regions") + "Accept: */*\r\n\r\n" }),
  "two Host headers": () => ({ bytes: line("GET", "/v1/regions") + "Host: a\r\nHost: b\r\n\r\n" }),
  "unknown Expect": (rng) => ({
    bytes:
      line("POST", "/v1/auth/token") + hostAnd(`Expect: ${rng.pick(["teapot", "200-ok", "100-continue, x", ""])}`, "Content-Length: 0"),
  }),
  CONNECT: () => ({ bytes: line("CONNECT", "example.com:443") + "Host: example.com:443\r\n\r\n" }),
  "garbage bytes": (rng) => ({ bytes: Buffer.from(Array.from({ length: rng.between(1, 200) }, () => rng.int(256))) }),
  "HTTP/2 preface without TLS": () => ({ bytes: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" }),
  "LF-only line endings": () => ({ bytes: "GET /v1/regions HTTP/1.1\nHost: gw\n\n" }),
  "obsolete line folding": () => ({ bytes: line("GET", "/v1/regions") + "Host: gw\r\nX-Folded: a\r\n b\r\n\r\n" }),
  "header without a colon": () => ({ bytes: line("GET", "/v1/regions") + "Host: gw\r\nNoColonHere\r\n\r\n" }),
  "space before the colon": () => ({ bytes: line("GET", "/v1/regions") + "Host : gw\r\n\r\n" }),
  "two Content-Lengths": (rng) => ({
    bytes: line("POST", "/v1/auth/token") + hostAnd("Content-Length: 2", `Content-Length: ${rng.between(3, 9)}`) + "{}",
  }),
  "odd Content-Length": (rng) => ({
    bytes:
      line("POST", "/v1/auth/token") +
      hostAnd(`Content-Length: ${rng.pick(["-1", "1e3", "0x10", "99999999999999999999", "2 2", "+2", ""])}`) +
      "{}",
  }),
  "invalid method": (rng) => ({
    bytes: line(rng.pick(["G\x00T", "GE T", "get", "G@T", "\u00e9", "A".repeat(20_000)]), "/v1/regions") + hostAnd(),
  }),
  "body shorter than Content-Length, then end": (rng) => ({
    bytes: line("POST", "/v1/auth/token") + hostAnd("Content-Type: application/json", `Content-Length: ${rng.between(10, 100)}`) + '{"a"',
  }),
  "pipelined: well-formed, then malformed": (_rng, auth) => ({
    bytes: line("GET", "/v1/regions") + hostAnd(`Authorization: ${auth}`) + line("GET", "/v1/regions", "HTTP/9.9") + hostAnd(),
  }),
  "smuggled request behind a chunked body": () => ({
    bytes:
      line("POST", "/v1/auth/token") +
      hostAnd("Content-Type: application/json", "Transfer-Encoding: chunked") +
      "0\r\n\r\n" +
      line("GET", "/v1/regions", "HTTP/7.7") +
      hostAnd(),
  }),
  "absolute-form target": (rng, auth) => ({
    bytes:
      line("GET", rng.pick(["http://evil.example/v1/regions", "https://gw/v1/regions", "//v1/regions", "*"])) +
      hostAnd(`Authorization: ${auth}`),
  }),
  "HTTP/1.0 without Host": (_rng, auth) => ({ bytes: line("GET", "/v1/regions", "HTTP/1.0") + `Authorization: ${auth}\r\n\r\n` }),
};

export const RAW_TEMPLATES = Object.keys(TEMPLATES);

/** The raw request of index `i`: the templates in turn (all covered early), each with its own variation. */
export function rawRequest(rng: Rng, ordinal: number, index: number, auth: string): RawRequest {
  const template = RAW_TEMPLATES[ordinal % RAW_TEMPLATES.length]!;
  const { bytes, later } = TEMPLATES[template]!(rng, auth);
  const buf = (b: Buffer | string) => (typeof b === "string" ? Buffer.from(b, "latin1") : b);
  return { index, template, bytes: buf(bytes), later: later === undefined ? undefined : buf(later) };
}

/** Every response in `data`, in order (bodies by Content-Length); what cannot be parsed ends the list. */
export function parseResponses(data: Buffer): Observed[] {
  const out: Observed[] = [];
  let at = 0;
  while (at < data.length) {
    const end = data.indexOf("\r\n\r\n", at);
    if (end < 0) break;
    const [statusLine, ...lines] = data.subarray(at, end).toString("latin1").split("\r\n");
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "");
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const colon = l.indexOf(":");
      if (colon > 0) headers[l.slice(0, colon).trim().toLowerCase()] = l.slice(colon + 1).trim();
    }
    const length = Number(headers["content-length"] ?? 0);
    out.push({ status: Number(m[1]), headers, body: data.subarray(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  return out;
}

/** Sends a raw request and collects everything until the server closes (or `timeoutMs`). */
export function sendRaw(port: number, req: RawRequest, timeoutMs = 10_000): Promise<{ data: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const timer = setTimeout(() => {
      error = `no close within ${timeoutMs} ms`;
      socket.destroy();
    }, timeoutMs);
    socket.on("data", (d) => chunks.push(d));
    socket.on("error", (e) => (error ??= (e as NodeJS.ErrnoException).code ?? e.message));
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ data: Buffer.concat(chunks), error });
    });
    socket.write(req.bytes);
    setTimeout(
      () => {
        if (req.later && socket.writable) socket.write(req.later);
        // Half-close after a moment: the answer still comes back, and a server waiting for more learns there is none.
        setTimeout(() => socket.writable && socket.end(), 200);
      },
      req.later ? 50 : 100,
    );
  });
}
