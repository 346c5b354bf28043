import http2 from "node:http2";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { IdentityService, PrincipalSchema } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInternalClient, requireInternalAuth } from "../src/index.ts";

/**
 * Issue #26's hang, reproduced: an internal client's session sits idle for
 * longer than its ping interval, so the next call first verifies it with a
 * PING; the peer dies while that PING is in flight (the kernel of a
 * SIGKILLed process closes the socket with FIN: a close without an error).
 * connect-node's session manager never settled that verification, and kept
 * it: the call hung, and every later call that found its session idle hung
 * too, until the process restarted. Here a proxy between client and a real
 * HTTP/2 server plays the dying peer: it closes the client's connection
 * cleanly on the first bytes the client sends after being told to.
 */
const SECRET = "verify-test-secret";
const PING_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function routes(router: ConnectRouter) {
  router.service(IdentityService, {
    async authenticate(req) {
      return { principal: create(PrincipalSchema, { userId: `user-of-${req.bearer}`, organizationId: "org_1" }) };
    },
  });
}

let server: http2.Http2Server;
let proxy: net.Server;
let url: string;
/** Set: the proxy closes the next client connection that sends anything, instead of forwarding it. */
let dieOnNextBytes = false;
let deaths = 0;
const sockets = new Set<net.Socket>();
const sessions = new Set<http2.ServerHttp2Session>();

beforeAll(async () => {
  server = http2.createServer(connectNodeAdapter({ routes, interceptors: [requireInternalAuth(SECRET)] }));
  server.on("session", (s) => sessions.add(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const target = (server.address() as AddressInfo).port;
  proxy = net.createServer((client) => {
    const upstream = net.connect(target, "127.0.0.1");
    sockets.add(client).add(upstream);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    upstream.pipe(client);
    client.on("data", (chunk: Buffer) => {
      if (dieOnNextBytes) {
        dieOnNextBytes = false;
        deaths++;
        // The peer is gone: nothing more reaches it, and the client sees a clean close (FIN), no error.
        upstream.unpipe(client);
        upstream.destroy();
        client.end();
        return;
      }
      upstream.write(chunk);
    });
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
  url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of sessions) s.destroy();
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => proxy.close(() => r()));
  await new Promise<void>((r) => server.close(() => r()));
});

/** The call's outcome, or "hung" when it has none after `ms`. */
async function within<T>(call: Promise<T>, ms: number): Promise<T | "hung"> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<"hung">((r) => {
    timer = setTimeout(() => r("hung"), ms);
  });
  try {
    return await Promise.race([call, hung]);
  } finally {
    clearTimeout(timer);
  }
}

describe("a session whose peer dies while it is being verified", () => {
  it("the call gets an answer (on a new session), and so do later calls after the session idles again", async () => {
    const client = createInternalClient(IdentityService, url, { secret: SECRET, caller: "tests", pingIntervalMs: PING_MS });
    const call = () => client.authenticate({ bearer: "tok" }, { timeoutMs: 5_000 }).then((r) => r.principal?.userId);
    expect(await call()).toBe("user-of-tok");

    // Idle past the ping interval: the next call verifies the session with a PING, which kills the "peer".
    await sleep(PING_MS * 3);
    dieOnNextBytes = true;
    // Generous bound: the call's own deadline (5 s) must end it even on a loaded machine; it used to hang for good.
    expect(await within(call(), 30_000)).toBe("user-of-tok");
    expect(deaths).toBe(1);

    // The manager must not keep the dead verification: a call on the new session, idle again, is verified afresh.
    await sleep(PING_MS * 3);
    expect(await within(call(), 30_000)).toBe("user-of-tok");
  }, 90_000);
});
