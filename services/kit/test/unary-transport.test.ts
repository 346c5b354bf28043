import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { IdentityService, PrincipalSchema } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInternalClient, invalidArgument, requireInternalAuth } from "../src/index.ts";

/**
 * The lean unary transport against connect-node's own server (the reference
 * implementation of the protocol): what a caller sees must be what
 * connect-node's transport would show it.
 */
const SECRET = "transport-test-secret";

interface Observed {
  header?: Headers;
  cancelled?: boolean;
  /** A "slow" or "hang" call reached its wait (so an abort after this has something to cancel). */
  waiting?: boolean;
  deadlineMs?: number;
}

const observed: Observed = {};

function routes(router: ConnectRouter) {
  router.service(IdentityService, {
    async authenticate(req, ctx) {
      observed.header = ctx.requestHeader;
      observed.deadlineMs = ctx.timeoutMs();
      switch (req.bearer) {
        case "invalid":
          ctx.responseTrailer.set("x-why", "bad bearer");
          throw invalidArgument([{ field: "bearer", message: "is malformed" }]);
        case "slow":
        case "hang":
          observed.waiting = true;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, req.bearer === "slow" ? 2_000 : 30_000);
            ctx.signal.addEventListener("abort", () => {
              observed.cancelled = true;
              clearTimeout(timer);
              resolve();
            });
          });
          return {};
        default:
          ctx.responseHeader.set("x-answer", "42");
          ctx.responseTrailer.set("x-trailer", "done");
          return { principal: create(PrincipalSchema, { userId: `user-of-${req.bearer}`, organizationId: "org_1" }) };
      }
    },
    async *watchRevocations(_req, ctx) {
      for (let i = 0; i < 3 && !ctx.signal.aborted; i++) {
        yield { event: { case: "revocation", value: { organizationId: `org_${i}` } } };
      }
    },
  });
}

let server: http2.Http2Server;
let url: string;
const sessions = new Set<http2.ServerHttp2Session>();

beforeAll(async () => {
  server = http2.createServer(connectNodeAdapter({ routes, interceptors: [requireInternalAuth(SECRET)] }));
  server.on("session", (s) => sessions.add(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  // Clients keep their sessions open: close them from this side.
  for (const s of sessions) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

const client = () => createInternalClient(IdentityService, url, { secret: SECRET, caller: "tests" });

describe("unary transport", () => {
  it("sends the message, credentials and headers; returns message, headers and trailers", async () => {
    let header: Headers | undefined;
    let trailer: Headers | undefined;
    const res = await client().authenticate(
      { bearer: "abc" },
      { headers: { "x-request-id": "r-1" }, onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) },
    );
    expect(res.principal?.userId).toBe("user-of-abc");
    expect(header?.get("x-answer")).toBe("42");
    expect(trailer?.get("x-trailer")).toBe("done");
    expect(observed.header?.get("x-request-id")).toBe("r-1");
    expect(observed.header?.get("content-type")).toBe("application/proto");
    expect(observed.header?.get("connect-protocol-version")).toBe("1");
    expect(observed.header?.get("x-dbaas-internal-auth")).toMatch(/^v1\.tests\./);
  });

  it("many concurrent calls share one session and each gets its own answer", async () => {
    const c = client();
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => c.authenticate({ bearer: `b${i}` })));
    expect(answers.map((a) => a.principal?.userId)).toEqual(Array.from({ length: 200 }, (_, i) => `user-of-b${i}`));
  });

  it("decodes a Connect error with its code, message and details", async () => {
    const err = await client()
      .authenticate({ bearer: "invalid" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    const ce = err as ConnectError;
    expect(ce.code).toBe(Code.InvalidArgument);
    expect(ce.rawMessage).toBe("request failed validation");
    expect(ce.metadata.get("x-why")).toBe("bad bearer");
    expect(ce.findDetails(FieldViolationSchema).map((v) => [v.field, v.message])).toEqual([["bearer", "is malformed"]]);
  });

  it("the server's refusal of a credential arrives as UNAUTHENTICATED", async () => {
    const wrong = createInternalClient(IdentityService, url, { secret: "another-secret", caller: "tests" });
    await expect(wrong.authenticate({ bearer: "x" })).rejects.toMatchObject({ code: Code.Unauthenticated });
  });

  it("a deadline travels to the server and ends the call with DEADLINE_EXCEEDED", async () => {
    observed.cancelled = false;
    const started = Date.now();
    await expect(client().authenticate({ bearer: "slow" }, { timeoutMs: 150 })).rejects.toMatchObject({
      code: Code.DeadlineExceeded,
    });
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(observed.deadlineMs).toBeGreaterThan(0);
    expect(observed.deadlineMs).toBeLessThanOrEqual(150);
    // Generous: on two loaded cores the server's side may hear of it a second or more later (the CI's failure).
    await expect.poll(() => observed.cancelled, { timeout: 15_000 }).toBe(true);
  });

  it("an aborted signal cancels the call on both sides", async () => {
    observed.cancelled = false;
    observed.waiting = false;
    const abort = new AbortController();
    const call = client().authenticate({ bearer: "hang" }, { signal: abort.signal });
    call.catch(() => {});
    // Aborted once the server is handling it (a fixed 100 ms was not always enough under load: the CI's failure).
    await expect.poll(() => observed.waiting, { timeout: 15_000 }).toBe(true);
    abort.abort();
    await expect(call).rejects.toMatchObject({ code: Code.Canceled });
    await expect.poll(() => observed.cancelled, { timeout: 15_000 }).toBe(true);
  });

  it("a signal aborted while the stream is being opened cancels the call (it used to hang)", async () => {
    // A fresh client: its first call waits for the connection, and the abort lands in that wait.
    const abort = new AbortController();
    const call = client().authenticate({ bearer: "abc" }, { signal: abort.signal });
    setImmediate(() => abort.abort());
    const hung = new Promise((_, reject) => setTimeout(() => reject(new Error("the call never settled")), 2_000).unref());
    await expect(Promise.race([call, hung])).rejects.toMatchObject({ code: Code.Canceled });
  });

  it("a path the server does not know answers UNIMPLEMENTED", async () => {
    const { AgentService } = await import("@dbaas/proto/agent");
    const other = createInternalClient(AgentService, url, { secret: SECRET, caller: "tests" });
    await expect(other.registerAgent({})).rejects.toMatchObject({ code: Code.Unimplemented });
  });

  it("server streams still work on the same client", async () => {
    const seen: string[] = [];
    for await (const msg of client().watchRevocations({})) {
      if (msg.event.case === "revocation") seen.push(msg.event.value.organizationId);
    }
    expect(seen).toEqual(["org_0", "org_1", "org_2"]);
  });

  it("an upstream nobody listens on is UNAVAILABLE (after the retries)", async () => {
    const probe = http2.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", () => r()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const down = createInternalClient(IdentityService, `http://127.0.0.1:${port}`, { secret: SECRET, caller: "tests" });
    await expect(down.authenticate({ bearer: "x" })).rejects.toMatchObject({ code: Code.Unavailable });
  });
});
