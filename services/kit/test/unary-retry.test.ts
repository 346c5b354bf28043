import http2 from "node:http2";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { AuthenticateResponseSchema, IdentityService } from "@dbaas/proto/identity";
import { afterEach, describe, expect, it } from "vitest";
import { createInternalClient, createLogger, startServer } from "../src/index.ts";

// A unary call is sent again only when it provably never reached a handler:
// a refused connection, a refused stream, a stream above the server's GOAWAY.
// A call whose session dies after the handler ran is UNAVAILABLE (503 at the
// gateway), never retried, never internal. Both client paths (our transport
// and connect-node's, INTERNAL_RPC_FAST_PATH=0) are held to it.

const SECRET = "unary-retry-secret";
const paths = [
  ["fast path", true],
  ["connect-node", false],
] as const;
const cleanup: Array<() => unknown> = [];

afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

function listen(server: net.Server | http2.Http2Server, port = 0): Promise<number> {
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

/** A TCP proxy in front of `port` whose connections the test can cut. */
async function startProxy(port: number): Promise<{ url: string; cut(): void }> {
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((down) => {
    const up = net.connect(port, "127.0.0.1");
    for (const s of [down, up]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        down.destroy();
        up.destroy();
        sockets.delete(s);
      });
    }
    down.pipe(up).pipe(down);
  });
  const proxyPort = await listen(proxy);
  cleanup.push(() => new Promise((r) => proxy.close(r)));
  return {
    url: `http://127.0.0.1:${proxyPort}`,
    cut: () => {
      for (const s of sockets) s.resetAndDestroy();
    },
  };
}

/**
 * A plain HTTP/2 server answering Authenticate as a Connect server would;
 * `onStream` may take a stream first (refuse it, send GOAWAY) by returning true.
 */
async function startRawServer(onStream: (stream: http2.ServerHttp2Stream, session: number, nth: number) => boolean, port = 0) {
  const seen = { sessions: 0, streams: 0, answered: [] as number[] };
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    seen.sessions++;
  });
  server.on("stream", (stream) => {
    stream.on("error", () => {});
    const session = seen.sessions;
    if (onStream(stream, session, ++seen.streams)) return;
    seen.answered.push(session);
    stream.resume();
    stream.on("end", () => {
      const body = toBinary(
        AuthenticateResponseSchema,
        create(AuthenticateResponseSchema, { principal: { userId: `session-${session}` } }),
      );
      stream.respond({ ":status": 200, "content-type": "application/proto" });
      stream.end(body);
    });
  });
  await listen(server, port);
  cleanup.push(() => {
    for (const s of sessions) s.destroy();
    return new Promise((r) => server.close(r));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe.each(paths)("retries (%s)", (_name, fastPath) => {
  const client = (url: string, retries = 2) =>
    createInternalClient(IdentityService, url, { secret: SECRET, caller: "tester", retries, fastPath });

  it("a handler that committed is not run again when its session dies: UNAVAILABLE", async () => {
    let commits = 0;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    const server = await startServer({
      port: 0,
      internalSecret: SECRET,
      log: createLogger("unary-retry"),
      fastPath,
      routes: (router) =>
        router.service(IdentityService, {
          async authenticate() {
            commits++;
            proxy!.cut();
            await new Promise((r) => setTimeout(r, 50));
            return {};
          },
        }),
    });
    cleanup.push(() => server.close());
    proxy = await startProxy(server.port);
    const err = await failure(client(proxy.url).authenticate({ bearer: "x" }));
    expect([Code[err.code], commits]).toEqual(["Unavailable", 1]);
    await new Promise((r) => setTimeout(r, 300));
    expect(commits).toBe(1);
  });

  it("a refused connection is retried and reaches the server once it listens", async () => {
    const probe = net.createServer();
    const port = await listen(probe);
    await new Promise((r) => probe.close(r));
    const down = `http://127.0.0.1:${port}`;
    expect(Code[(await failure(client(down, 0).authenticate({ bearer: "x" }))).code]).toBe("Unavailable");

    const call = client(down, 4).authenticate({ bearer: "x" });
    await new Promise((r) => setTimeout(r, 20));
    const late = await startRawServer(() => false, port);
    expect((await call).principal?.userId).toBe("session-1");
    expect(late.seen.answered).toEqual([1]);
  });

  it("a refused stream is retried", async () => {
    const server = await startRawServer((stream, _session, nth) => {
      if (nth !== 1) return false;
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      return true;
    });
    // Our transport moves to a new session; connect-node's keeps the one it has.
    const session = fastPath ? 2 : 1;
    expect((await client(server.url).authenticate({ bearer: "x" })).principal?.userId).toBe(`session-${session}`);
    expect(server.seen.answered).toEqual([session]);
  });

  it("without retries, a refused stream is UNAVAILABLE", async () => {
    const server = await startRawServer((stream) => {
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      return true;
    });
    expect(Code[(await failure(client(server.url, 0).authenticate({ bearer: "x" }))).code]).toBe("Unavailable");
  });
});

describe("GOAWAY (fast path: it knows each stream's id)", () => {
  const client = (url: string) => createInternalClient(IdentityService, url, { secret: SECRET, caller: "tester", fastPath: true });

  it("a stream above the GOAWAY's last stream id is retried on a new session", async () => {
    let firstId = 0;
    const server = await startRawServer((stream, session, nth) => {
      if (session !== 1 || nth === 1) {
        firstId ||= stream.id!;
        return false;
      }
      // The first stream was processed; this one (a higher id) was not.
      stream.session!.goaway(http2.constants.NGHTTP2_INTERNAL_ERROR, firstId);
      return true;
    });
    const c = client(server.url);
    expect((await c.authenticate({ bearer: "x" })).principal?.userId).toBe("session-1");
    expect((await c.authenticate({ bearer: "x" })).principal?.userId).toBe("session-2");
    expect(server.seen.answered).toEqual([1, 2]);
  });

  it("a stream the GOAWAY counts as processed is UNAVAILABLE and not retried", async () => {
    const server = await startRawServer((stream) => {
      // "Processed": the handler may have run, as under nghttp2's rapid-reset GOAWAY.
      stream.session!.goaway(http2.constants.NGHTTP2_INTERNAL_ERROR, stream.id!);
      return true;
    });
    const err = await failure(client(server.url).authenticate({ bearer: "x" }));
    expect(Code[err.code]).toBe("Unavailable");
    expect(err.rawMessage).toContain("GOAWAY INTERNAL_ERROR (0x2)");
    expect(server.seen.sessions).toBe(1);
  });
});
