import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createInternalClient, createLogger, startServer, type RunningServer } from "../src/index.ts";

// UNAVAILABLE tells a client the call never reached a handler, so that it may
// send it again (our internal client did so for every UNAVAILABLE). A handler
// that did reach its work must therefore never answer UNAVAILABLE, whatever it
// threw.

const SECRET = "unavailable-test-secret";

/** Handler runs, by method name. */
const runs = new Map<string, number>();
const ran = (method: string) => runs.set(method, (runs.get(method) ?? 0) + 1);

let server: RunningServer;

/** Plays an outer interceptor that refuses a call before any handler runs (as databaseOutage does). */
const refuseBeforeHandler: Interceptor = (next) => async (req) => {
  if (
    !req.stream &&
    req.method.name === "GetOrganization" &&
    (req.message as unknown as { organizationId: string }).organizationId === "refused"
  ) {
    throw new ConnectError("cannot reach its database; try again shortly", Code.Unavailable);
  }
  return await next(req);
};

beforeAll(async () => {
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("unavailable-test"),
    interceptors: [refuseBeforeHandler],
    routes: (router) =>
      router.service(IdentityService, {
        // Does its work, then a call it makes to another service fails with UNAVAILABLE, passed on unchanged.
        async signup() {
          ran("signup");
          throw new ConnectError("upstream connect ECONNREFUSED 10.0.0.7:7002", Code.Unavailable);
        },
        async getOrganization() {
          ran("getOrganization");
          return {};
        },
        // A stream that is not ready keeps UNAVAILABLE: nothing was done, and no client resends a stream.
        // biome-ignore lint/correctness/useYield: a stream that fails before its first message.
        async *watchRevocations() {
          ran("watchRevocations");
          throw new ConnectError("revocation feed is not available yet", Code.Unavailable);
        },
      }),
  });
});

afterAll(async () => {
  await server?.close();
});

beforeEach(() => runs.clear());

const client = () => createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "tester", retries: 2 });

async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

describe("UNAVAILABLE means the call did not run", () => {
  it("a handler's UNAVAILABLE becomes a failed dependency (503) with a generic message, and the handler runs once", async () => {
    const err = await failure(client().signup({ email: "a@example.com", password: "long enough", name: "A", organizationName: "A" }));
    expect(Code[err.code]).toBe("Aborted");
    expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["service_unavailable"]);
    expect(err.rawMessage).toBe("a service this call depends on is unavailable; try again shortly");
    expect(err.rawMessage).not.toContain("10.0.0.7");
    expect(runs.get("signup")).toBe(1);
  });

  it("a refusal before the handler (an outer interceptor's) stays UNAVAILABLE", async () => {
    const err = await failure(client().getOrganization({ organizationId: "refused" }));
    expect(Code[err.code]).toBe("Unavailable");
    expect(runs.get("getOrganization")).toBeUndefined();
  });

  it("a stream keeps its UNAVAILABLE", async () => {
    const err = await failure(
      (async () => {
        for await (const _ of client().watchRevocations({})) break;
      })(),
    );
    expect(Code[err.code]).toBe("Unavailable");
    expect(err.rawMessage).toBe("revocation feed is not available yet");
  });
});
