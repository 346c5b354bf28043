import { SCOPES } from "@dbaas/catalogue";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { createLogger, invalidArgument, notFound, startServer, withReason, type RunningServer } from "@dbaas/kit";
import { DatabaseSchema, DatabasesService } from "@dbaas/proto/databases";
import {
  ApiKeySchema,
  IdentityService,
  PrincipalSchema,
  Role,
  type Principal,
  type Revocation,
  type WatchRevocationsResponseSchema,
} from "@dbaas/proto/identity";
import { PUBLIC_CODES } from "../../src/errors.ts";
import { backupRoutes } from "./backups-stub.ts";
import { metricsRoutes } from "./metrics-stub.ts";
import { edgeRoutes } from "./edge-stub.ts";
import { haRoutes } from "./ha-stub.ts";
import { insideRoutes } from "./inside-stub.ts";
import { replicaRoutes } from "./replicas-stub.ts";
import { billingRoutes } from "./billing-stub.ts";
import { record, T0, type StubState } from "./stub-state.ts";
import { transitionFrom } from "../../../services/databases/src/lifecycle.ts";

export type { StubInvoice, StubState } from "./stub-state.ts";

/**
 * Just enough of identity, databases and billing to drive the gateway: real
 * Connect servers over HTTP/2 (the kit's startServer, internal auth and all),
 * in-memory state, and a few ids that make an upstream fail on purpose.
 */
export const SECRET = "gateway-test-internal-secret";

export const ALL_PERMISSIONS = [...SCOPES];

export function principal(init: { org: string; permissions: string[]; plan?: string; expiresAt?: Date; kind?: string }): Principal {
  return create(PrincipalSchema, {
    userId: `user-${init.org}`,
    organizationId: init.org,
    role: Role.OWNER,
    plan: init.plan ?? "free",
    credentialKind: init.kind ?? "session",
    credentialId: `cred-${init.org}`,
    permissions: init.permissions,
    scopes: init.permissions,
    expiresAt: timestampFromDate(init.expiresAt ?? new Date(Date.now() + 3_600_000)),
  });
}

export interface Stubs {
  identityUrl: string;
  databasesUrl: string;
  billingUrl: string;
  state: StubState;
  close(): Promise<void>;
}

/**
 * Ids that make the databases stub fail, shaped like database ids so that
 * the gateway lets them through: `db-fail<connect code number>`,
 * `db-reason<public code without underscores>` (FAILED_PRECONDITION with an
 * ErrorReason; `db-reasonmadeup` names no public code), `db-slow<ms>`.
 */
async function injected(id: string): Promise<void> {
  let m = /^db-fail(\d+)$/.exec(id);
  if (m) throw new ConnectError(`injected failure at 10.0.0.7:5432 (${m[1]})`, Number(m[1]) as Code);
  m = /^db-reason([a-z]+)$/.exec(id);
  if (m) {
    const reason = PUBLIC_CODES.find((c) => c.replaceAll("_", "") === m![1]) ?? m[1]!;
    throw withReason(`injected ${reason}`, Code.FailedPrecondition, reason);
  }
  m = /^db-slow(\d+)$/.exec(id);
  if (m) await new Promise((r) => setTimeout(r, Number(m![1])));
}

function connectionString(db: { username: string; host: string; port: number; database: string }, password: string): string {
  return `postgresql://${db.username}:${password}@${db.host}:${db.port}/${db.database}?sslmode=require`;
}

/** CreateDatabase's checks and record, shared with RestoreToTime (which answers exactly like it). */
function newDatabase(state: StubState, req: { organizationId: string; name: string; region: string; tier: string; version: string }) {
  const violations = [];
  // The gateway refuses short names and unknown regions itself; this name stands for what only the service knows.
  const refused = req.name === "stub-refuses";
  if (req.name.length < 3 || refused) violations.push({ field: "name", message: "must be 3-63 characters" });
  if (!["fsn1", "nbg1", "hel1"].includes(req.region) || refused) {
    violations.push({ field: "region", message: "must be one of: fsn1, nbg1, hel1" });
  }
  if (violations.length > 0) throw invalidArgument(violations);
  // As the service: a name is unique among the organization's live databases (stubs-conform.test.ts compares).
  if ([...state.databases.values()].some((e) => e.db.organizationId === req.organizationId && e.db.name === req.name)) {
    throw new ConnectError(`a database named "${req.name}" already exists`, Code.AlreadyExists);
  }
  if (req.tier === "large") throw withReason("add a payment method first", Code.FailedPrecondition, "payment_required");
  const id = `db-${String(state.databases.size + 1).padStart(4, "0")}`;
  const db = create(DatabaseSchema, {
    id,
    organizationId: req.organizationId,
    name: req.name,
    region: req.region,
    tier: req.tier,
    version: req.version || "17",
    status: "provisioning",
    host: `${id}.db.example.test`,
    port: 5432,
    database: "defaultdb",
    username: "dbadmin",
    createdAt: timestampFromDate(T0),
    updatedAt: timestampFromDate(T0),
  });
  db.connectionString = connectionString(db, "********");
  const password = "s3cret-password-of-24-chars";
  state.databases.set(id, { db, password });
  return { database: db, password, connectionString: connectionString(db, password) };
}

function identityRoutes(state: StubState) {
  return (router: ConnectRouter) =>
    router.service(IdentityService, {
      async authenticate(req) {
        state.authenticateCalls++;
        const p = state.tokens.get(req.bearer);
        if (!p) throw new ConnectError("token is invalid or expired", Code.Unauthenticated);
        return { principal: p };
      },
      async signup(req) {
        record(state, "signup", req);
        if (req.email === "taken@example.com") throw new ConnectError("e-mail already registered", Code.AlreadyExists);
        return {
          user: { id: "user-new", email: req.email, name: req.name },
          organization: { id: "org-new", name: req.organizationName, plan: "free", createdAt: timestampFromDate(T0) },
          token: { accessToken: "tok-new", tokenType: "Bearer", expiresAt: timestampFromDate(T0) },
        };
      },
      async createToken(req) {
        record(state, "createToken", req);
        if (req.password !== "correct horse") throw new ConnectError("wrong e-mail or password", Code.Unauthenticated);
        return { token: { accessToken: "tok-login", tokenType: "Bearer", expiresAt: timestampFromDate(T0) } };
      },
      // Identity's rules for keys, as its contract states them: scopes within the actor's permissions (none: all
      // of them), and settings:write to see or revoke another member's key. Every key is one organization's here.
      async createApiKey(req) {
        record(state, "createApiKey", req);
        const held = req.actor?.permissions ?? [];
        const lacking = req.scopes.filter((s) => !held.includes(s));
        if (lacking.length > 0) {
          throw new ConnectError(`a key cannot have scopes its creator's credential lacks: ${lacking.join(", ")}`, Code.PermissionDenied);
        }
        const key = create(ApiKeySchema, {
          id: `key-${state.apiKeys.length + 1}`,
          name: req.name,
          scopes: req.scopes.length > 0 ? req.scopes : held,
          prefix: "dbk_abcd",
          createdAt: timestampFromDate(T0),
          expiresAt: req.expiresAt,
          createdBy: req.actor?.userId ?? "",
          role: Role.ADMIN,
        });
        state.apiKeys.push(key);
        return { apiKey: key, secret: "dbk_abcd_secret" };
      },
      async listApiKeys(req) {
        record(state, "listApiKeys", req);
        const everyone = req.actor?.permissions.includes("settings:write") ?? false;
        return { apiKeys: state.apiKeys.filter((k) => everyone || k.createdBy === req.actor?.userId) };
      },
      async revokeApiKey(req) {
        record(state, "revokeApiKey", req);
        const i = state.apiKeys.findIndex((k) => k.id === req.id);
        if (i < 0) throw notFound("api key");
        if (state.apiKeys[i]!.createdBy !== req.actor?.userId && !req.actor?.permissions.includes("settings:write")) {
          const message = "only its creator, an owner or an admin (settings:write) can revoke another member's API key";
          throw new ConnectError(message, Code.PermissionDenied);
        }
        state.apiKeys.splice(i, 1);
        return {};
      },
      async getOrganization(req) {
        return { organization: { id: req.organizationId, name: "Acme", plan: "free", createdAt: timestampFromDate(T0) } };
      },
      async *watchRevocations(_req, ctx): AsyncGenerator<MessageInitShape<typeof WatchRevocationsResponseSchema>> {
        if (state.feedDown) throw new ConnectError("revocation feed is not available yet", Code.Unavailable);
        const queue: Array<Revocation | "break"> = [];
        let wake: (() => void) | undefined;
        const push = (event: Revocation | "break") => {
          queue.push(event);
          wake?.();
        };
        state.watchers.add(push);
        const subscriptionId = `sub-${++state.subscriptions}`;
        let seq = 0n;
        try {
          yield { event: { case: "subscribed", value: { subscriptionId } } };
          while (!ctx.signal.aborted) {
            if (queue.length === 0) {
              await new Promise<void>((resolve) => {
                wake = resolve;
                ctx.signal.addEventListener("abort", () => resolve(), { once: true });
              });
            }
            for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
              if (next === "break") throw new ConnectError("revocation feed interrupted", Code.Unavailable);
              yield { event: { case: "revocation", value: next }, seq: ++seq };
            }
          }
        } finally {
          state.watchers.delete(push);
        }
      },
      async ackRevocation(req) {
        state.acks.push({ subscriptionId: req.subscriptionId, seq: Number(req.seq), cacheSize: state.cacheSizeAtAck?.() });
        return {};
      },
    });
}

function databasesRoutes(state: StubState) {
  const find = async (org: string, id: string) => {
    await injected(id);
    const entry = state.databases.get(id);
    if (!entry || entry.db.organizationId !== org) throw notFound("database");
    return entry;
  };
  // The service's lifecycle table decides which status an operation may start from (409 otherwise).
  const transition = async (org: string, id: string, op: "start" | "stop" | "restart") => {
    const entry = await find(org, id);
    entry.db.status = transitionFrom(op, entry.db.status).to ?? entry.db.status;
    return { database: entry.db };
  };
  const inside = insideRoutes(state, find);
  return (router: ConnectRouter) => {
    inside(router);
    databasesService(router);
  };
  function databasesService(router: ConnectRouter) {
    router.service(DatabasesService, {
      async createDatabase(req) {
        record(state, "createDatabase", req);
        if (req.name.startsWith("slow-")) await new Promise((r) => setTimeout(r, 400));
        if (req.name === "flaky" && state.flaky) throw new ConnectError("try again later", Code.Unavailable);
        return newDatabase(state, req);
      },
      async getDatabase(req) {
        return { database: (await find(req.organizationId, req.id)).db };
      },
      // What the gateway sends for concurrent GETs: each item answered as getDatabase would.
      async batchGetDatabases(req) {
        record(state, "batchGetDatabases", req);
        const results = await Promise.all(
          req.requests.map((r) =>
            find(r.organizationId, r.id).then(
              (entry) => ({ result: { case: "database" as const, value: entry.db } }),
              (err: unknown) => {
                const e = ConnectError.from(err);
                return { result: { case: "error" as const, value: { code: e.code, message: e.rawMessage } } };
              },
            ),
          ),
        );
        return { results };
      },
      async listDatabases(req) {
        record(state, "listDatabases", req);
        const all = [...state.databases.values()]
          .map((e) => e.db)
          .filter((d) => d.organizationId === req.organizationId)
          .filter((d) => req.status === "" || d.status === req.status)
          .filter((d) => req.region === "" || d.region === req.region);
        const start = (req.page - 1) * req.perPage;
        return { databases: all.slice(start, start + req.perPage), total: all.length, page: req.page, perPage: req.perPage };
      },
      async updateDatabase(req) {
        const entry = await find(req.organizationId, req.id);
        if (req.name !== undefined) entry.db.name = req.name;
        return { database: entry.db };
      },
      async deleteDatabase(req) {
        await find(req.organizationId, req.id);
        state.databases.delete(req.id);
        return {};
      },
      startDatabase: (req) => transition(req.organizationId, req.id, "start"),
      stopDatabase: (req) => transition(req.organizationId, req.id, "stop"),
      restartDatabase: (req) => transition(req.organizationId, req.id, "restart"),
      async resizeDatabase(req) {
        const entry = await find(req.organizationId, req.id);
        entry.db.status = transitionFrom("resize", entry.db.status).to ?? entry.db.status;
        entry.db.tier = req.tier;
        return { database: entry.db };
      },
      async resetPassword(req) {
        const entry = await find(req.organizationId, req.id);
        transitionFrom("reset-password", entry.db.status);
        entry.password = "a-brand-new-password-24ch";
        return { password: entry.password, connectionString: connectionString(entry.db, entry.password) };
      },
      async listOperations(req) {
        record(state, "listOperations", req);
        await find(req.organizationId, req.databaseId);
        return {
          operations: [
            {
              id: "op-1",
              databaseId: req.databaseId,
              type: "create",
              status: "succeeded",
              startedAt: timestampFromDate(T0),
              finishedAt: timestampFromDate(new Date(T0.getTime() + 30_000)),
            },
            { id: "op-2", databaseId: req.databaseId, type: "stop", status: "running", startedAt: timestampFromDate(T0) },
            ...(state.operations.get(req.databaseId) ?? []),
          ],
          total: 2 + (state.operations.get(req.databaseId)?.length ?? 0),
          page: req.page,
          perPage: req.perPage,
        };
      },
      async getCaCertificate(req) {
        await find(req.organizationId, req.id);
        return { pem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" };
      },
      async restoreDatabase() {
        throw new ConnectError("not in the stub", Code.Unimplemented);
      },
      ...backupRoutes(state, find, newDatabase),
      ...metricsRoutes(state, find),
      ...replicaRoutes(state, find, newDatabase),
      ...edgeRoutes(state, find),
      ...haRoutes(state, find),
      async listRegions() {
        return { regions: [{ code: "fsn1", name: "Falkenstein, DE" }] };
      },
      async listTiers() {
        return { tiers: [{ name: "micro", vcpu: 1, memoryGb: 1, storageGb: 10, hourlyPrice: 0.02 }] };
      },
      async listVersions() {
        return {
          versions: [
            { version: "16", isDefault: false },
            { version: "17", isDefault: true },
          ],
        };
      },
    });
  }
}

export async function startStubs(secret = SECRET): Promise<Stubs> {
  const state: StubState = {
    tokens: new Map(),
    authenticateCalls: 0,
    databases: new Map(),
    replicas: new Map(),
    ha: new Map(),
    backups: new Map(),
    operations: new Map(),
    apiKeys: [],
    paymentMethods: [],
    invoices: [],
    alerts: [],
    flaky: false,
    seen: new Map(),
    watchers: new Set(),
    feedDown: false,
    subscriptions: 0,
    acks: [],
  };
  const log = createLogger("stub");
  const servers: RunningServer[] = [];
  for (const routes of [identityRoutes(state), databasesRoutes(state), billingRoutes(state)]) {
    servers.push(await startServer({ port: 0, routes, internalSecret: secret, log }));
  }
  const [identity, databases, billing] = servers as [RunningServer, RunningServer, RunningServer];
  return {
    identityUrl: identity.url,
    databasesUrl: databases.url,
    billingUrl: billing.url,
    state,
    close: async () => {
      await Promise.all(servers.map((s) => s.close()));
    },
  };
}
