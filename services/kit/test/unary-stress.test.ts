import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInternalClient, createLogger, invalidArgument, startServer, type RunningServer } from "../src/index.ts";

// The fuzz load of issue #10 in miniature: thousands of internal calls on ONE
// HTTP/2 session, most of them failing one way or another (bad payloads,
// bodies over the read limit, methods the server does not implement, callers
// that cancel, deadlines that pass), with valid calls among them. Every call
// must get its own answer; before the fix the client reset every stream that
// had answered with an error, the server's rapid-reset protection (nghttp2:
// 1000 resets, then 33 a second) answered with GOAWAY(INTERNAL_ERROR), and the
// valid calls in flight on that session failed as internal errors (500s).

const SECRET = "unary-stress-secret";
const READ_MAX_BYTES = 4096;

let server: RunningServer;

beforeAll(async () => {
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("unary-stress"),
    readMaxBytes: READ_MAX_BYTES,
    routes: (router) =>
      router.service(IdentityService, {
        async authenticate(req: { bearer: string }, ctx: HandlerContext) {
          if (req.bearer === "invalid") throw invalidArgument([{ field: "bearer", message: "is malformed" }]);
          if (req.bearer === "hang") {
            await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
            throw ctx.signal.reason;
          }
          return { principal: { userId: req.bearer, organizationId: "org-1" } };
        },
      }),
  });
});

afterAll(async () => {
  await server?.close();
});

type Kind = "valid" | "invalid" | "too-large" | "unimplemented" | "cancelled" | "deadline";

/** What each kind of call must end with: the answer for valid calls, else the code. */
const expected: Record<Exclude<Kind, "valid">, Code> = {
  invalid: Code.InvalidArgument,
  "too-large": Code.ResourceExhausted,
  unimplemented: Code.Unimplemented,
  cancelled: Code.Canceled,
  deadline: Code.DeadlineExceeded,
};

async function outcome(call: Promise<object>): Promise<string | Code> {
  try {
    const res = (await call) as { principal?: { userId: string } };
    return res.principal?.userId ?? "";
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

describe("one session under a load of failing calls", () => {
  it("answers every call, valid ones included, without losing the session", async () => {
    // Calls without a deadline of their own keep none here (the kit's default is 30 s): this test is about resets, and at
    // load ~36 on 2 cores some over-limit calls took longer than 30 s (ended DEADLINE_EXCEEDED by the default; see #26).
    const client = createInternalClient(IdentityService, server.url, {
      secret: SECRET,
      caller: "stress",
      retries: 0,
      defaultTimeoutMs: 600_000,
    });
    const kinds: Kind[] = ["valid", "invalid", "too-large", "unimplemented", "cancelled", "deadline", "invalid", "valid"];
    const run = (i: number): Promise<[Kind, string | Code, string]> => {
      const kind = kinds[i % kinds.length]!;
      const id = `user-${i}`;
      switch (kind) {
        case "valid":
          return outcome(client.authenticate({ bearer: id })).then((o) => [kind, o, id]);
        case "invalid":
          return outcome(client.authenticate({ bearer: "invalid" })).then((o) => [kind, o, id]);
        case "too-large":
          return outcome(client.authenticate({ bearer: "x".repeat(READ_MAX_BYTES + 1) })).then((o) => [kind, o, id]);
        case "unimplemented":
          return outcome(client.signup({})).then((o) => [kind, o, id]);
        case "cancelled": {
          const abort = new AbortController();
          setTimeout(() => abort.abort(), 2 + (i % 7));
          return outcome(client.authenticate({ bearer: "hang" }, { signal: abort.signal })).then((o) => [kind, o, id]);
        }
        case "deadline":
          return outcome(client.authenticate({ bearer: "hang" }, { timeoutMs: 5 + (i % 11) })).then((o) => [kind, o, id]);
      }
    };
    const TOTAL = 6_000;
    const CONCURRENCY = 150;
    const results: Array<[Kind, string | Code, string]> = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < TOTAL) results.push(await run(next++));
      }),
    );
    const wrong = results.filter(([kind, got, id]) => (kind === "valid" ? got !== id : got !== expected[kind]));
    const summary = (rs: typeof results) =>
      rs.reduce<Record<string, number>>((acc, [kind, got]) => {
        const key = `${kind} → ${typeof got === "string" ? "answer" : Code[got]}`;
        acc[key] = (acc[key] ?? 0) + 1;
        return acc;
      }, {});
    expect(summary(wrong)).toEqual({});
    expect(results).toHaveLength(TOTAL);
  });
});
