/**
 * HTTP that Node's server refuses before the app sees it gets the error
 * envelope and the standard headers (src/http-errors.ts), over raw sockets:
 * fetch cannot send any of this.
 */
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { readConfig } from "../src/config.ts";
import { createContext, type GatewayContext } from "../src/context.ts";
import { clientErrorOf } from "../src/http-errors.ts";
import { createGatewayServer } from "../src/server.ts";
import { ALL_PERMISSIONS, principal, SECRET, startStubs, type Stubs } from "./support/stubs.ts";

interface RawResponse {
  status: number;
  /** Lower-cased names; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: string;
  /** Everything the server sent, for the failure message. */
  raw: string;
}

/** Sends `chunks` (with a pause between them) and collects what comes back until the server closes. */
function send(port: number, ...chunks: Array<string | Buffer>): Promise<RawResponse> {
  return exchange(port, chunks);
}

/** Sends `request` and half-closes at once, as `nc -N` does: the answer must still come back. */
function sendAndEnd(port: number, request: string): Promise<RawResponse> {
  return exchange(port, [], request);
}

/** Writes `chunks` with pauses, or, given `last`, writes it and half-closes at once. */
function exchange(port: number, chunks: Array<string | Buffer>, last?: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const received: Buffer[] = [];
    socket.on("data", (d) => received.push(d));
    socket.on("error", reject);
    socket.on("close", () => {
      const raw = Buffer.concat(received).toString("latin1");
      const split = raw.indexOf("\r\n\r\n");
      const [statusLine, ...lines] = raw.slice(0, split).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? "")?.[1] ?? 0);
      resolve({ status, headers, body: Buffer.from(raw.slice(split + 4), "latin1").toString("utf8"), raw });
    });
    if (last !== undefined) {
      socket.end(last);
      return;
    }
    void (async () => {
      for (const chunk of chunks) {
        if (!socket.writable) return;
        socket.write(chunk);
        await new Promise((r) => setTimeout(r, 30));
      }
      // Half-close: the server's answer still comes back.
      if (socket.writable) socket.end();
    })();
  });
}

/** The envelope, the request id in header and body, the security headers: what every answer carries. */
function expectEnvelope(res: RawResponse, status: number, code: string) {
  expect(res.status, res.raw).toBe(status);
  expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
  const body = JSON.parse(res.body);
  expect(body).toEqual({
    error: { code, message: expect.any(String), details: [] },
    meta: { request_id: expect.stringMatching(/^req_[a-z0-9]{24}$/) },
  });
  expect(res.headers["x-request-id"]).toBe(body.meta.request_id);
  expect(res.headers["x-content-type-options"]).toBe("nosniff");
  expect(res.headers["cache-control"]).toBe("no-store");
  expect(Number(res.headers["content-length"])).toBe(Buffer.byteLength(res.body));
  return body;
}

let stubs: Stubs;
let ctx: GatewayContext;
let server: Server;
let port: number;
const TOKEN = "tok-malformed";

async function startServer(
  env: Record<string, string>,
  limiterDelayMs = 0,
): Promise<{ ctx: GatewayContext; server: Server; port: number }> {
  const config = readConfig({
    IDENTITY_URL: stubs.identityUrl,
    DATABASES_URL: stubs.databasesUrl,
    BILLING_URL: stubs.billingUrl,
    INTERNAL_AUTH_SECRET: SECRET,
    PORT: "0",
    ...env,
  });
  const ctx = createContext(config);
  if (limiterDelayMs > 0) {
    // A limiter that takes its time (Redis far away, a loaded event loop): answers are decided late.
    const { limiter } = ctx;
    ctx.limiter = {
      consume: async (subject, windows) => {
        await new Promise((r) => setTimeout(r, limiterDelayMs));
        return await limiter.consume(subject, windows);
      },
    };
  }
  const server = createGatewayServer(ctx, createApp(ctx));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { ctx, server, port: (server.address() as AddressInfo).port };
}

async function stopServer(s: { ctx: GatewayContext; server: Server }) {
  s.server.closeAllConnections();
  await new Promise<void>((resolve) => s.server.close(() => resolve()));
  await s.ctx.close();
}

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-malformed", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  ({ ctx, server, port } = await startServer({ IP_RATE_LIMIT_PER_MINUTE: "1000", IP_RATE_LIMIT_PER_DAY: "100000" }));
});

afterAll(async () => {
  if (server) await stopServer({ ctx, server });
  await stubs?.close();
});

const GET = (head: string) => `GET /v1/regions HTTP/1.1\r\nHost: gw\r\n${head}\r\n`;

describe("malformed HTTP gets the envelope", () => {
  const cases: Array<[string, () => Array<string | Buffer>, number, string]> = [
    ["a control character in a header value", () => [GET("X-Note: a\x01b\r\n")], 400, "validation_error"],
    ["a space in a header name", () => [GET("Bad Header: y\r\n")], 400, "validation_error"],
    ["HTTP/9.9", () => ["GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n"], 400, "validation_error"],
    [
      "Content-Length with Transfer-Encoding",
      () => [
        "POST /v1/auth/token HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      ],
      400,
      "validation_error",
    ],
    [
      "two Content-Lengths",
      () => ["POST /v1/auth/token HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}"],
      400,
      "validation_error",
    ],
    [
      "a raw non-ASCII path",
      () => [Buffer.concat([Buffer.from("GET /v1/databases/caf"), Buffer.from("é"), Buffer.from(" HTTP/1.1\r\nHost: gw\r\n\r\n")])],
      400,
      "validation_error",
    ],
    ["headers over 16 KB", () => [GET(`X-Big: ${"a".repeat(17 * 1024)}\r\n`)], 431, "request_header_too_large"],
    ["no request line at all", () => ["\x00\x01\x02\r\n\r\n"], 400, "validation_error"],
    ["HTTP/2 without TLS", () => ["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"], 400, "validation_error"],
    ["HTTP/1.1 without Host", () => ["GET /v1/regions HTTP/1.1\r\n\r\n"], 400, "validation_error"],
    [
      "an Expect other than 100-continue",
      () => ["POST /v1/auth/token HTTP/1.1\r\nHost: gw\r\nExpect: teapot\r\nContent-Length: 0\r\n\r\n"],
      417,
      "validation_error",
    ],
    ["CONNECT", () => ["CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"], 400, "validation_error"],
  ];

  it.each(cases)("%s", async (_name, request, status, code) => {
    const res = await send(port, ...request());
    expectEnvelope(res, status, code);
    // Counted against the client IP like any request without a credential.
    expect(res.headers["x-ratelimit-limit"]).toBe("1000");
    expect(Number(res.headers["x-ratelimit-remaining"])).toBeLessThan(1000);
    expect(Number(res.headers["x-ratelimit-reset"])).toBeGreaterThan(Date.now() / 1000);
  });

  it("a bad chunk size in the body of a request the app is already handling: that request's id", async () => {
    const head =
      "POST /v1/databases HTTP/1.1\r\nHost: gw\r\nX-Request-Id: my-own-id\r\n" +
      `Authorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const res = await send(port, head, '2\r\n{"\r\n', "zz\r\nname\r\n0\r\n\r\n");
    expect(res.status, res.raw).toBe(400);
    const body = JSON.parse(res.body);
    expect(body.error.code).toBe("validation_error");
    expect(body.error.message).toMatch(/chunk/);
    // The app had taken the request on: its id (the client's own, a sane token) is kept.
    expect(res.headers["x-request-id"]).toBe("my-own-id");
    expect(body.meta.request_id).toBe("my-own-id");
  });

  it("answers once, however much the client sends after the error", async () => {
    const res = await send(port, "GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n", GET(""), GET(""), "garbage\r\n\r\n");
    expectEnvelope(res, 400, "validation_error");
    expect(res.raw.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
  });

  it("after a good request on a kept-alive connection, the malformed next one is answered too", async () => {
    const res = await send(port, GET(`Authorization: Bearer ${TOKEN}\r\n`), "GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n");
    const statuses = [...res.raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    expect(statuses).toEqual([200, 400]);
    const second = res.raw.slice(res.raw.lastIndexOf("HTTP/1.1 "));
    const body = JSON.parse(second.slice(second.indexOf("\r\n\r\n") + 4));
    expect(body.error.code).toBe("validation_error");
    expect(second).toContain(`X-Request-Id: ${body.meta.request_id}`);
  });

  it("a client-supplied X-Request-Id is echoed when Node parsed the request (no Host)", async () => {
    const res = await send(port, "GET /v1/regions HTTP/1.1\r\nX-Request-Id: client-42\r\n\r\n");
    expect(res.status).toBe(400);
    expect(res.headers["x-request-id"]).toBe("client-42");
    expect(JSON.parse(res.body).meta.request_id).toBe("client-42");
  });

  it("HTTP/1.0 needs no Host: the app answers", async () => {
    const res = await send(port, `GET /v1/regions HTTP/1.0\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
    expect(res.status, res.raw).toBe(200);
  });
});

describe("malformed HTTP and the per-IP limit", () => {
  let limited: { ctx: GatewayContext; server: Server; port: number };

  beforeAll(async () => {
    limited = await startServer({ IP_RATE_LIMIT_PER_MINUTE: "2", IP_RATE_LIMIT_PER_DAY: "100" });
  });
  afterAll(async () => {
    if (limited) await stopServer(limited);
  });

  it("is counted; past the limit the answer is a 429 in the envelope", async () => {
    const bad = "GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n";
    const first = await send(limited.port, bad);
    expectEnvelope(first, 400, "validation_error");
    expect(first.headers["x-ratelimit-remaining"]).toBe("1");
    expectEnvelope(await send(limited.port, bad), 400, "validation_error");
    const refused = await send(limited.port, bad);
    expectEnvelope(refused, 429, "rate_limit_exceeded");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThan(0);
  });
});

describe("behind proxies", () => {
  let proxied: { ctx: GatewayContext; server: Server; port: number };

  beforeAll(async () => {
    proxied = await startServer({ TRUST_PROXY_HOPS: "1", IP_RATE_LIMIT_PER_MINUTE: "1" });
  });
  afterAll(async () => {
    if (proxied) await stopServer(proxied);
  });

  it("the socket's peer is the proxy: nothing is counted against it, no X-RateLimit-* is made up", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await send(proxied.port, "GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n");
      expectEnvelope(res, 400, "validation_error");
      expect(res.headers["x-ratelimit-limit"]).toBeUndefined();
    }
  });
});

describe("a client that half-closes right after its request still gets the answer", () => {
  let slow: { ctx: GatewayContext; server: Server; port: number };

  beforeAll(async () => {
    slow = await startServer({ IP_RATE_LIMIT_PER_MINUTE: "1000" }, 200);
  });
  afterAll(async () => {
    if (slow) await stopServer(slow);
  });

  it("a malformed request (the answer waits for the limiter)", async () => {
    expectEnvelope(await sendAndEnd(slow.port, "GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n"), 400, "validation_error");
  });

  it("a request Node parsed but the app does not take (no Host)", async () => {
    expectEnvelope(await sendAndEnd(slow.port, "GET /v1/regions HTTP/1.1\r\n\r\n"), 400, "validation_error");
  });

  it("a malformed request pipelined behind one the app is still answering: that answer first, then the envelope", async () => {
    const good = `GET /v1/regions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`;
    const res = await sendAndEnd(slow.port, `${good}GET /v1/regions HTTP/9.9\r\nHost: gw\r\n\r\n`);
    const statuses = [...res.raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    expect(statuses).toEqual([200, 400]);
    const second = res.raw.slice(res.raw.lastIndexOf("HTTP/1.1 "));
    expect(JSON.parse(second.slice(second.indexOf("\r\n\r\n") + 4)).error.code).toBe("validation_error");
  });

  it("a well-formed request the app answers", async () => {
    const res = await sendAndEnd(slow.port, `GET /v1/regions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
    expect(res.status, res.raw).toBe(200);
    expect(JSON.parse(res.body).data).toBeDefined();
  });
});

describe("what each of Node's client errors becomes", () => {
  const of = (code: string) => {
    const err = clientErrorOf(Object.assign(new Error("x"), { code }));
    return err && [err.status, err.code];
  };

  it("maps the ones a raw socket cannot provoke quickly", () => {
    // Node's headersTimeout/requestTimeout are checked every 30 s: too slow for a test over a socket.
    expect(of("ERR_HTTP_REQUEST_TIMEOUT")).toEqual([408, "request_timeout"]);
    expect(of("HPE_CHUNK_EXTENSIONS_OVERFLOW")).toEqual([413, "payload_too_large"]);
    expect(of("HPE_SOMETHING_NEW")).toEqual([400, "validation_error"]);
  });

  it("answers nothing for a socket error that is no fault of a request", () => {
    expect(of("ECONNRESET")).toBeUndefined();
    expect(of("EPIPE")).toBeUndefined();
  });
});
