import http2 from "node:http2";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_UNARY_TIMEOUT_MS } from "../src/client.ts";
import { createInternalClient, requireInternalAuth } from "../src/index.ts";

/**
 * Issue #26: no internal call waits for ever. A peer that accepts the TCP
 * connection and never completes the HTTP/2 handshake (no SETTINGS: a wedged
 * process, a half-dead host) never answers, and a session that stops
 * answering while idle holds the next call in its verification (a PING): only
 * the call's own deadline can end either — the one its caller set, or the
 * client's default (defaultTimeoutMs, DEFAULT_UNARY_TIMEOUT_MS unless set).
 */
const SECRET = "deadline-test-secret";

let silent: Server;
let silentUrl: string;
const accepted = new Set<Socket>();

beforeAll(async () => {
  silent = createServer((socket) => {
    // Taken and never answered: the client's connection preface gets no SETTINGS back.
    accepted.add(socket);
    socket.on("error", () => {});
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
  silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of accepted) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
});

/** `call` settled, or a failure saying it did not within `ms` (a hang is what these tests guard against). */
function within<T>(call: Promise<T>, ms = 10_000): Promise<T> {
  const hung = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`the call did not settle within ${ms} ms`)), ms).unref(),
  );
  return Promise.race([call, hung]);
}

describe.each([
  ["the unary transport (fast path)", true],
  ["connect-node's transport", false],
])("a peer that never completes the HTTP/2 handshake, through %s", (_name, fastPath) => {
  it("a call with timeoutMs ends with DEADLINE_EXCEEDED once it passes", async () => {
    const client = createInternalClient(IdentityService, silentUrl, { secret: SECRET, caller: "tests", fastPath });
    const started = performance.now();
    await expect(within(client.authenticate({ bearer: "x" }, { timeoutMs: 300 }))).rejects.toMatchObject({
      code: Code.DeadlineExceeded,
    });
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(5_000);
  });

  it("a call without one ends at the client's default deadline (defaultTimeoutMs)", async () => {
    const client = createInternalClient(IdentityService, silentUrl, { secret: SECRET, caller: "tests", fastPath, defaultTimeoutMs: 300 });
    await expect(within(client.authenticate({ bearer: "x" }))).rejects.toMatchObject({ code: Code.DeadlineExceeded });
  });
});

/**
 * A TCP relay in front of `port` whose server-to-client direction can be stopped: the peer's process wedged
 * after the session was up (its kernel still takes what the client sends; nothing comes back, PINGs' answers
 * included).
 */
async function startRelay(port: number) {
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  const server = createServer((client) => {
    const upstream = connect(port, "127.0.0.1");
    const pair = { client, upstream };
    pairs.add(pair);
    for (const s of [client, upstream]) s.on("error", () => {});
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => pairs.delete(pair));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    mute() {
      for (const { upstream } of pairs) {
        upstream.unpipe();
        upstream.pause();
      }
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe("a session that stopped answering while idle", () => {
  let server: http2.Http2Server;
  let port: number;
  const sessions = new Set<http2.ServerHttp2Session>();

  beforeAll(async () => {
    const routes = (router: ConnectRouter) =>
      router.service(IdentityService, {
        async authenticate() {
          return {};
        },
      });
    server = http2.createServer(connectNodeAdapter({ routes, interceptors: [requireInternalAuth(SECRET)] }));
    server.on("session", (s) => sessions.add(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  // The next call on an idle session first verifies it with a PING (connect-node's wait for its answer: 15 s);
  // the unary transport waits for that stream no longer than the call's deadline (its own message says so).
  it.each([
    ["timeoutMs, fast path", { timeoutMs: 300 }, { fastPath: true }],
    ["the client's default deadline, fast path", {}, { defaultTimeoutMs: 300, fastPath: true }],
    ["timeoutMs, connect-node's transport", { timeoutMs: 300 }, { fastPath: false }],
    ["the client's default deadline, connect-node's transport", {}, { defaultTimeoutMs: 300, fastPath: false }],
  ])("a call waiting for the session's verification ends at its deadline (%s)", async (_name, callOptions, clientOptions) => {
    const relay = await startRelay(port);
    try {
      const client = createInternalClient(IdentityService, relay.url, {
        secret: SECRET,
        caller: "tests",
        pingIntervalMs: 50,
        ...clientOptions,
      });
      await client.authenticate({ bearer: "x" });
      // Idle for longer than the ping interval: the next request verifies the session first.
      await new Promise((r) => setTimeout(r, 200));
      relay.mute();
      const started = performance.now();
      await expect(within(client.authenticate({ bearer: "x" }, callOptions))).rejects.toMatchObject({
        code: Code.DeadlineExceeded,
        ...(clientOptions.fastPath && { rawMessage: expect.stringContaining("waiting for a connection") }),
      });
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      await relay.close();
    }
  });
});

describe("the default deadline of a unary call", () => {
  let server: http2.Http2Server;
  let url: string;
  const sessions = new Set<http2.ServerHttp2Session>();
  let seen: number | undefined;

  beforeAll(async () => {
    const routes = (router: ConnectRouter) =>
      router.service(IdentityService, {
        async authenticate(_req, ctx) {
          seen = ctx.timeoutMs();
          return {};
        },
      });
    server = http2.createServer(connectNodeAdapter({ routes, interceptors: [requireInternalAuth(SECRET)] }));
    server.on("session", (s) => sessions.add(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it.each([true, false])(
    "is DEFAULT_UNARY_TIMEOUT_MS (30 s) when neither the call nor the client names one (fast path %s)",
    async (fastPath) => {
      expect(DEFAULT_UNARY_TIMEOUT_MS).toBe(30_000);
      seen = undefined;
      await createInternalClient(IdentityService, url, { secret: SECRET, caller: "tests", fastPath }).authenticate({ bearer: "x" });
      // What the server was told is left of it (Connect-Timeout-Ms): the default less the time on the way.
      expect(seen).toBeGreaterThan(DEFAULT_UNARY_TIMEOUT_MS - 10_000);
      expect(seen).toBeLessThanOrEqual(DEFAULT_UNARY_TIMEOUT_MS);
    },
  );
});
