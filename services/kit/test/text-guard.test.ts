import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { AgentService } from "@dbaas/proto/agent";
import { BillingService } from "@dbaas/proto/billing";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { DatabasesService } from "@dbaas/proto/databases";
import { IdentityService, Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createInternalClient, createLogger, internalCredentialInterceptor, startServer, type RunningServer } from "../src/index.ts";

// Every server refuses request strings holding NUL before any handler runs:
// PostgreSQL cannot store them, and the error it answers became a 500.

const SECRET = "text-guard-test-secret";

/** Handler invocations, by method: a refused request must never reach one. */
const ran = new Map<string, number>();
const count = (method: string) => ran.set(method, (ran.get(method) ?? 0) + 1);

let server: RunningServer;

beforeAll(async () => {
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("text-guard-test"),
    routes: (router) => {
      router.service(DatabasesService, {
        async getDatabase(req) {
          count("getDatabase");
          return { database: { id: req.id, organizationId: req.organizationId } };
        },
        async batchGetDatabases(req) {
          count("batchGetDatabases");
          return {
            results: req.requests.map(() => ({
              result: { case: "error" as const, value: { code: Code.NotFound, message: "database not found" } },
            })),
          };
        },
      });
      router.service(IdentityService, {
        async transferOwnership() {
          count("transferOwnership");
          return {};
        },
        async createApiKey() {
          count("createApiKey");
          return {};
        },
      });
      router.service(BillingService, {
        async recordStatusEvents(req) {
          count("recordStatusEvents");
          return { recorded: req.events.length };
        },
      });
      router.service(AgentService, {
        async *watchAssignments() {
          count("watchAssignments");
          yield {};
        },
      });
    },
  });
});

afterAll(async () => {
  await server?.close();
});

beforeEach(() => ran.clear());

type Flavour = "internal client (binary, fast path)" | "connect JSON" | "gRPC";
const flavours: Flavour[] = ["internal client (binary, fast path)", "connect JSON", "gRPC"];

function clients(flavour: Flavour) {
  const interceptors: Interceptor[] = [internalCredentialInterceptor(SECRET, "tester")];
  const baseUrl = server.url;
  if (flavour === "internal client (binary, fast path)") {
    const opts = { secret: SECRET, caller: "tester" };
    return {
      databases: createInternalClient(DatabasesService, baseUrl, opts),
      identity: createInternalClient(IdentityService, baseUrl, opts),
      billing: createInternalClient(BillingService, baseUrl, opts),
      agents: createInternalClient(AgentService, baseUrl, opts),
    };
  }
  const transport =
    flavour === "gRPC"
      ? createGrpcTransport({ baseUrl, interceptors })
      : createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: false, interceptors });
  return {
    databases: createClient(DatabasesService, transport),
    identity: createClient(IdentityService, transport),
    billing: createClient(BillingService, transport),
    agents: createClient(AgentService, transport),
  };
}

async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

const fields = (err: ConnectError) => err.findDetails(FieldViolationSchema).map((v) => v.field);

describe.each(flavours)("NUL in a request string (%s)", (flavour) => {
  let c: ReturnType<typeof clients>;
  beforeAll(() => {
    c = clients(flavour);
  });

  it("in the id a call looks up: NOT_FOUND, and the handler never runs", async () => {
    const err = await failure(c.databases.getDatabase({ organizationId: "org-1", id: "db-abc\0" }));
    expect(Code[err.code]).toBe("NotFound");
    const org = await failure(c.databases.getDatabase({ organizationId: "\0", id: "db-abc" }));
    expect(Code[org.code]).toBe("NotFound");
    expect(ran.get("getDatabase")).toBeUndefined();
    // The same call without NUL runs.
    await c.databases.getDatabase({ organizationId: "org-1", id: "db-abc" });
    expect(ran.get("getDatabase")).toBe(1);
  });

  it("in a body field: INVALID_ARGUMENT naming each field by its public name, nested ones with their path", async () => {
    const err = await failure(
      c.identity.transferOwnership({
        organizationId: "org-1",
        actor: { userId: "usr-\0", role: Role.OWNER },
        newOwnerId: "\u0000",
        password: "pass\0word",
      }),
    );
    expect(Code[err.code]).toBe("InvalidArgument");
    expect(fields(err).sort()).toEqual(["actor.user_id", "new_owner_id", "password"]);
    const scopes = await failure(c.identity.createApiKey({ organizationId: "org-1", name: "k", scopes: ["databases:read", "x\0"] }));
    expect(fields(scopes)).toEqual(["scopes[1]"]);
    const events = await failure(
      c.billing.recordStatusEvents({
        events: [
          { eventId: "evt-1", organizationId: "org-1", databaseId: "db-1", tier: "micro", status: "running" },
          { eventId: "evt-2", organizationId: "org-1", databaseId: "db-\0", tier: "micro", status: "running" },
        ],
      }),
    );
    expect(fields(events)).toEqual(["events[1].database_id"]);
    expect([...ran.keys()]).toEqual([]);
  });

  it("in a streaming call's request: refused before the handler runs", async () => {
    const stream = c.agents.watchAssignments({ agentId: "agent\0" });
    const err = await failure(
      (async () => {
        for await (const _ of stream) break;
      })(),
    );
    expect(Code[err.code]).toBe("InvalidArgument");
    expect(fields(err)).toEqual(["agent_id"]);
    expect(ran.get("watchAssignments")).toBeUndefined();
  });

  it("a batch of GetDatabase requests is left to its handler: one impossible item does not fail the others", async () => {
    const res = await c.databases.batchGetDatabases({
      requests: [
        { organizationId: "org-1", id: "db-\0" },
        { organizationId: "org-1", id: "db-1" },
      ],
    });
    expect(res.results).toHaveLength(2);
    expect(ran.get("batchGetDatabases")).toBe(1);
  });
});
