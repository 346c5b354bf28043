/**
 * The authorization matrix: every route of the table that drives the guards ×
 * every role (owner, admin, developer, viewer) and an API key scoped to
 * `databases:read` × the caller's own organization and another one's, against
 * the real identity service (stub databases and billing behind the gateway).
 *
 * Each route needs an expectation below, written from docs/product.md, Roles and permissions (not from the
 * code): the permission it should need, what success looks like, and whether
 * it names a resource. A route added to the table without one fails this test,
 * and so does an expectation for a route that no longer exists.
 */
import { create } from "@bufbuild/protobuf";
import { Role } from "@dbaas/proto/identity";
import { DbRoleSchema, LogicalDbSchema } from "@dbaas/proto/inside";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Permission } from "../src/routes/route.ts";
import { ROUTES } from "../src/routes/table.ts";
import { api, startGateway, waitForRevocationFeed, type TestGateway } from "./support/gateway.ts";
import { mailedToken, PASSWORD, startRealIdentity, uniqueEmail, type RealIdentity, type RoleName } from "./support/identity.ts";
import { seedBackups } from "./support/backups-stub.ts";
import { insideOf } from "./support/inside-stub.ts";
import { KEY_SCOPES, matrixFixtures, SPEC_2_7, type MatrixWorld } from "./support/matrix-world.ts";
import { startStubs, type Stubs } from "./support/stubs.ts";

type Caller = RoleName | "key";
const CALLERS: Caller[] = ["owner", "admin", "developer", "viewer", "key"];

interface Target {
  world: MatrixWorld;
  /** Who is asking: a resource that is "their own" (an API key) is made by them when the target is their organization. */
  caller: Caller;
  /** Whether `world` is another organization than the caller's. */
  other: boolean;
}

interface Request {
  path: string;
  body?: unknown;
}

interface ProtectedExpectation {
  permission: Permission;
  success: 200 | 201 | 202 | 204;
  /** "resource": the path names a resource of the target organization, another's answers 404. */
  scope: "resource" | "organization";
  /** Identity allows only the owner, whatever the permission (transfer, delete). */
  ownerOnly?: boolean;
  /** The route changes the organization for good: every case gets a fresh one. */
  destructive?: boolean;
  /** The `data` key of a list: its items must all be the caller's organization's. */
  list?: string;
  request(target: Target): Promise<Request>;
}

interface PublicExpectation {
  public: true;
  success: 200 | 201;
  request(): Promise<Request>;
}

let stubs: Stubs;
let identity: RealIdentity;
let gw: TestGateway;
let A: MatrixWorld;
let B: MatrixWorld;
let fixtures: ReturnType<typeof matrixFixtures>;
let serial = 0;
const freshDatabase = (w: MatrixWorld) => fixtures.freshDatabase(w);
const freshReplica = (w: MatrixWorld) => fixtures.freshReplica(w);
const freshMember = (w: MatrixWorld) => fixtures.freshMember(w);
const freshInvitation = (w: MatrixWorld) => fixtures.freshInvitation(w);
const freshApiKey = (w: MatrixWorld, scopes?: string[], role?: RoleName) => fixtures.freshApiKey(w, scopes, role);
const freshAlert = (w: MatrixWorld) => fixtures.freshAlert(w);
const freshPaymentMethod = (w: MatrixWorld) => fixtures.freshPaymentMethod(w);
const setupWorld = (label: string, opts: { database: boolean }) => fixtures.setupWorld(label, opts);

const resource = (w: MatrixWorld, suffix = "") => `/v1/databases/${w.database}${suffix}`;

/** A running database without a backup under way: one backup at a time, so each request gets its own. */
async function runningDatabase(w: MatrixWorld, status = "running"): Promise<string> {
  const id = await freshDatabase(w);
  stubs.state.databases.get(id)!.db.status = status;
  return id;
}

const MATRIX: Record<string, ProtectedExpectation | PublicExpectation> = {
  "POST /v1/auth/signup": {
    public: true,
    success: 201,
    request: async () => ({
      path: "/v1/auth/signup",
      body: { email: uniqueEmail("signup"), password: PASSWORD, name: "N", organization_name: "O" },
    }),
  },
  "POST /v1/auth/token": {
    public: true,
    success: 200,
    request: async () => ({ path: "/v1/auth/token", body: { email: A.users.viewer.email, password: PASSWORD } }),
  },
  "POST /v1/invitations/accept": {
    public: true,
    success: 201,
    request: async () => {
      const email = uniqueEmail("accept");
      await identity.client.createInvitation({
        organizationId: A.org,
        actor: { userId: A.users.owner.id, role: Role.OWNER },
        email,
        role: "viewer",
      });
      return { path: "/v1/invitations/accept", body: { token: await mailedToken(identity, email), name: "New", password: PASSWORD } };
    },
  },
  "GET /v1/openapi.json": { public: true, success: 200, request: async () => ({ path: "/v1/openapi.json" }) },

  "POST /v1/databases": {
    permission: "databases:write",
    success: 201,
    scope: "organization",
    request: async () => ({ path: "/v1/databases", body: { name: `new-${++serial}`, region: "fsn1", tier: "micro" } }),
  },
  "GET /v1/databases": {
    permission: "databases:read",
    success: 200,
    scope: "organization",
    list: "databases",
    request: async () => ({ path: "/v1/databases?per_page=100" }),
  },
  "GET /v1/databases/:id": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world) }),
  },
  "PATCH /v1/databases/:id": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world), body: { name: `renamed-${++serial}` } }),
  },
  "DELETE /v1/databases/:id": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await freshDatabase(t.world)}` }),
  },
  "POST /v1/databases/:id/start": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    // The stub applies the service's lifecycle table: a database starts from stopped, the rest from running.
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world, "stopped")}/start` }),
  },
  "POST /v1/databases/:id/stop": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/stop` }),
  },
  "POST /v1/databases/:id/restart": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/restart` }),
  },
  "POST /v1/databases/:id/resize": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/resize`, body: { tier: "small" } }),
  },
  "POST /v1/databases/:id/reset-password": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/reset-password` }),
  },
  "GET /v1/databases/:id/operations": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/operations") }),
  },
  "GET /v1/databases/:id/backups": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/backups") }),
  },
  // "View metrics" (docs/product.md, Roles and permissions): every role.
  "GET /v1/databases/:id/metrics": {
    permission: "metrics:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/metrics") }),
  },
  // "Manage backups" (docs/product.md, Roles and permissions): owner, admin, developer.
  "POST /v1/databases/:id/backups": {
    permission: "backups:write",
    success: 202,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/backups` }),
  },
  "POST /v1/databases/:id/restore": {
    permission: "backups:write",
    success: 201,
    scope: "resource",
    request: async (t) => {
      seedBackups(stubs.state, t.world.database);
      return { path: resource(t.world, "/restore"), body: { name: `restored-${++serial}` } };
    },
  },
  // Replicas are databases to docs/product.md, Roles and permissions: seeing them is viewing databases, the rest creating or deleting one.
  "GET /v1/databases/:id/replicas": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    list: "replicas",
    request: async (t) => ({ path: `/v1/databases/${(await freshReplica(t.world)).database}/replicas` }),
  },
  "POST /v1/databases/:id/replicas": {
    permission: "databases:write",
    success: 201,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/replicas`, body: { name: `replica-${++serial}` } }),
  },
  "GET /v1/databases/:id/replicas/:rid": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => {
      const { database, replica } = await freshReplica(t.world);
      return { path: `/v1/databases/${database}/replicas/${replica}` };
    },
  },
  "DELETE /v1/databases/:id/replicas/:rid": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => {
      const { database, replica } = await freshReplica(t.world);
      return { path: `/v1/databases/${database}/replicas/${replica}` };
    },
  },
  "POST /v1/databases/:id/replicas/:rid/promote": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => {
      const { database, replica } = await freshReplica(t.world);
      return { path: `/v1/databases/${database}/replicas/${replica}/promote` };
    },
  },
  "GET /v1/databases/:id/trusted-sources": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    list: "trusted_sources",
    request: async (t) => ({ path: `/v1/databases/${(await fixtures.freshTrustedSource(t.world)).database}/trusted-sources` }),
  },
  "POST /v1/databases/:id/trusted-sources": {
    permission: "databases:write",
    success: 201,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await freshDatabase(t.world)}/trusted-sources`, body: { cidr: "10.0.0.0/8" } }),
  },
  "DELETE /v1/databases/:id/trusted-sources/:tsid": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => {
      const { database, trustedSource } = await fixtures.freshTrustedSource(t.world);
      return { path: `/v1/databases/${database}/trusted-sources/${trustedSource}` };
    },
  },
  "GET /v1/databases/:id/pooler": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/pooler") }),
  },
  "PATCH /v1/databases/:id/pooler": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/pooler"), body: { mode: "session" } }),
  },
  // High availability: seeing it is viewing a database; standbys and a switchover change what runs.
  "GET /v1/databases/:id/high-availability": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/high-availability") }),
  },
  "PUT /v1/databases/:id/high-availability": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({
      path: `/v1/databases/${await runningDatabase(t.world)}/high-availability`,
      body: { standbys: 1, synchronous: true },
    }),
  },
  "POST /v1/databases/:id/failover": {
    permission: "databases:write",
    success: 202,
    scope: "resource",
    request: async (t) => {
      const id = await runningDatabase(t.world);
      stubs.state.ha.set(id, { standbys: 1, synchronous: false });
      return { path: `/v1/databases/${id}/failover` };
    },
  },
  // Inside a database (docs/product.md, Inside the database): reading needs databases:read, changing roles and dbs databases:write.
  "GET /v1/databases/:id/roles": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/roles` }),
  },
  "POST /v1/databases/:id/roles": {
    permission: "databases:write",
    success: 201,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/roles`, body: { name: `role_${++serial}` } }),
  },
  "DELETE /v1/databases/:id/roles/:name": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => {
      const id = await runningDatabase(t.world);
      insideOf(stubs.state, id).roles.set("reader", create(DbRoleSchema, { name: "reader", login: true }));
      return { path: `/v1/databases/${id}/roles/reader` };
    },
  },
  "POST /v1/databases/:id/roles/:name/reset-password": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/roles/dbadmin/reset-password` }),
  },
  "GET /v1/databases/:id/dbs": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/dbs` }),
  },
  "POST /v1/databases/:id/dbs": {
    permission: "databases:write",
    success: 201,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/dbs`, body: { name: `app_${++serial}` } }),
  },
  "DELETE /v1/databases/:id/dbs/:name": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => {
      const id = await runningDatabase(t.world);
      insideOf(stubs.state, id).dbs.set("scratch", create(LogicalDbSchema, { name: "scratch", owner: "dbadmin" }));
      return { path: `/v1/databases/${id}/dbs/scratch` };
    },
  },
  "GET /v1/databases/:id/config": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/config") }),
  },
  "PATCH /v1/databases/:id/config": {
    permission: "databases:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/config"), body: { parameters: { work_mem: "8MB" } } }),
  },
  "GET /v1/databases/:id/extensions": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/extensions` }),
  },
  "POST /v1/databases/:id/extensions": {
    permission: "databases:write",
    success: 201,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/extensions`, body: { name: "pg_trgm" } }),
  },
  "DELETE /v1/databases/:id/extensions/:name": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => {
      const id = await runningDatabase(t.world);
      insideOf(stubs.state, id).extensions.add("pg_trgm");
      return { path: `/v1/databases/${id}/extensions/pg_trgm` };
    },
  },
  // The server's log and query insights: reading them is metrics:read (a viewer too); a reset changes the database.
  "GET /v1/databases/:id/logs": {
    permission: "metrics:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/logs?severity=error&limit=10") }),
  },
  "GET /v1/databases/:id/queries": {
    permission: "metrics:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/queries?order_by=calls` }),
  },
  "POST /v1/databases/:id/queries/reset": {
    permission: "databases:write",
    success: 204,
    scope: "resource",
    request: async (t) => ({ path: `/v1/databases/${await runningDatabase(t.world)}/queries/reset` }),
  },
  "GET /v1/databases/:id/ca-certificate": {
    permission: "databases:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: resource(t.world, "/ca-certificate") }),
  },
  "GET /v1/regions": { permission: "databases:read", success: 200, scope: "organization", request: async () => ({ path: "/v1/regions" }) },
  "GET /v1/tiers": { permission: "databases:read", success: 200, scope: "organization", request: async () => ({ path: "/v1/tiers" }) },
  "GET /v1/versions": {
    permission: "databases:read",
    success: 200,
    scope: "organization",
    request: async () => ({ path: "/v1/versions" }),
  },

  "GET /v1/billing/usage": {
    permission: "billing:read",
    success: 200,
    scope: "organization",
    request: async () => ({ path: "/v1/billing/usage" }),
  },
  "GET /v1/billing/payment-methods": {
    permission: "billing:read",
    success: 200,
    scope: "organization",
    list: "payment_methods",
    request: async () => ({ path: "/v1/billing/payment-methods?per_page=100" }),
  },
  "POST /v1/billing/payment-methods": {
    permission: "billing:write",
    success: 201,
    scope: "organization",
    request: async () => ({ path: "/v1/billing/payment-methods", body: { type: "card", token: "tok_mastercard" } }),
  },
  "PATCH /v1/billing/payment-methods/:id": {
    permission: "billing:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/billing/payment-methods/${await freshPaymentMethod(t.world)}`, body: { default: true } }),
  },
  "DELETE /v1/billing/payment-methods/:id": {
    permission: "billing:write",
    success: 204,
    scope: "resource",
    // Not the default (the world's first card is): always removable.
    request: async (t) => ({ path: `/v1/billing/payment-methods/${await freshPaymentMethod(t.world)}` }),
  },
  "POST /v1/billing/alerts": {
    permission: "billing:write",
    success: 201,
    scope: "organization",
    request: async () => ({ path: "/v1/billing/alerts", body: { threshold: 50, currency: "USD", channels: ["email"] } }),
  },
  "GET /v1/billing/alerts": {
    permission: "billing:read",
    success: 200,
    scope: "organization",
    list: "alerts",
    request: async () => ({ path: "/v1/billing/alerts?per_page=100" }),
  },
  "DELETE /v1/billing/alerts/:id": {
    permission: "billing:write",
    success: 204,
    scope: "resource",
    request: async (t) => ({ path: `/v1/billing/alerts/${await freshAlert(t.world)}` }),
  },
  "GET /v1/billing/invoices": {
    permission: "billing:read",
    success: 200,
    scope: "organization",
    list: "invoices",
    request: async () => ({ path: "/v1/billing/invoices?per_page=100" }),
  },
  "GET /v1/billing/invoices/:id/pdf": {
    permission: "billing:read",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/billing/invoices/${t.world.invoice}/pdf` }),
  },

  "GET /v1/organization": {
    permission: "members:read",
    success: 200,
    scope: "organization",
    request: async () => ({ path: "/v1/organization" }),
  },
  "PATCH /v1/organization": {
    permission: "settings:write",
    success: 200,
    scope: "organization",
    request: async () => ({ path: "/v1/organization", body: { name: `Renamed ${++serial}` } }),
  },
  "DELETE /v1/organization": {
    permission: "organization:delete",
    success: 204,
    scope: "organization",
    ownerOnly: true,
    destructive: true,
    request: async () => ({ path: "/v1/organization" }),
  },
  "GET /v1/organization/members": {
    permission: "members:read",
    success: 200,
    scope: "organization",
    list: "members",
    request: async () => ({ path: "/v1/organization/members?per_page=100" }),
  },
  "POST /v1/organization/members": {
    permission: "members:write",
    success: 201,
    scope: "organization",
    request: async () => ({ path: "/v1/organization/members", body: { email: uniqueEmail("invited"), role: "viewer" } }),
  },
  "PATCH /v1/organization/members/:id": {
    permission: "members:write",
    success: 200,
    scope: "resource",
    request: async (t) => ({ path: `/v1/organization/members/${await freshMember(t.world)}`, body: { role: "developer" } }),
  },
  "DELETE /v1/organization/members/:id": {
    permission: "members:write",
    success: 204,
    scope: "resource",
    request: async (t) => ({ path: `/v1/organization/members/${await freshMember(t.world)}` }),
  },
  "GET /v1/organization/invitations": {
    permission: "members:read",
    success: 200,
    scope: "organization",
    list: "invitations",
    request: async () => ({ path: "/v1/organization/invitations?per_page=100" }),
  },
  "DELETE /v1/organization/invitations/:id": {
    permission: "members:write",
    success: 204,
    scope: "resource",
    request: async (t) => ({ path: `/v1/organization/invitations/${await freshInvitation(t.world)}` }),
  },
  "POST /v1/organization/transfer": {
    permission: "members:write",
    success: 200,
    scope: "organization",
    ownerOnly: true,
    destructive: true,
    request: async (t) => ({ path: "/v1/organization/transfer", body: { new_owner_id: t.world.users.admin.id, password: PASSWORD } }),
  },
  // API keys are for every member (issue 10): the routes need what every role holds; identity scopes the rest.
  "GET /v1/organization/api-keys": {
    permission: "members:read",
    success: 200,
    scope: "organization",
    list: "api_keys",
    request: async () => ({ path: "/v1/organization/api-keys?per_page=100" }),
  },
  "POST /v1/organization/api-keys": {
    permission: "members:read",
    success: 201,
    scope: "organization",
    request: async () => ({ path: "/v1/organization/api-keys", body: { name: `key ${++serial}` } }),
  },
  "DELETE /v1/organization/api-keys/:id": {
    permission: "members:read",
    success: 204,
    scope: "resource",
    // One's own key: the caller's when in their organization (the scoped key is the owner's), the owner's elsewhere.
    request: async (t) => {
      const creator: RoleName = t.other || t.caller === "key" ? "owner" : t.caller;
      return { path: `/v1/organization/api-keys/${(await freshApiKey(t.world, [], creator)).id}` };
    },
  },
};

const routeKey = (r: { method: string; path: string }) => `${r.method} ${r.path}`;

function permitted(caller: Caller, permission: Permission): boolean {
  if (caller === "key") return SPEC_2_7.owner.includes(permission) && KEY_SCOPES.includes(permission);
  return SPEC_2_7[caller].includes(permission);
}

function expected(e: ProtectedExpectation, caller: Caller, other: boolean): { status: number; code?: string } {
  if (!permitted(caller, e.permission)) return { status: 403, code: "insufficient_permissions" };
  if (e.ownerOnly && caller !== "owner") return { status: 403, code: "insufficient_permissions" };
  if (other) return { status: 404, code: "resource_not_found" };
  return { status: e.success };
}

const tokenOf = (w: MatrixWorld, caller: Caller) => (caller === "key" ? w.key : w.users[caller].token);

beforeAll(async () => {
  stubs = await startStubs();
  identity = await startRealIdentity(stubs);
  fixtures = matrixFixtures(stubs, identity);
  gw = await startGateway({ ...stubs, identityUrl: identity.url });
  await waitForRevocationFeed(gw);
  [A, B] = await Promise.all([setupWorld("Matrix A", { database: true }), setupWorld("Matrix B", { database: true })]);
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await identity?.close();
  await stubs?.close();
});

describe("the matrix covers the route table exactly", () => {
  it("has an expectation for every route", () => {
    const missing = ROUTES.map(routeKey).filter((k) => !(k in MATRIX));
    expect(missing, "routes without a matrix expectation").toEqual([]);
  });

  it("has no expectation for a route that does not exist", () => {
    const known = new Set(ROUTES.map(routeKey));
    expect(Object.keys(MATRIX).filter((k) => !known.has(k))).toEqual([]);
  });

  it("agrees with the table on which routes are public", () => {
    for (const route of ROUTES) {
      const e = MATRIX[routeKey(route)];
      if (e) expect("public" in e, routeKey(route)).toBe(!("permission" in route));
    }
  });
});

describe.each(ROUTES.map((r) => [routeKey(r), r] as const))("%s", (key, route) => {
  const e = MATRIX[key];

  if (e && "public" in e) {
    it("is open to anyone: no credential, or a bad one, is not asked for", async () => {
      for (const token of [undefined, "not-a-credential"]) {
        const req = await e.request();
        const res = await api(gw.url, req.path, { method: route.method, token, body: req.body });
        expect(res.status, `${key} with token ${token}: ${res.text}`).toBe(e.success);
      }
    });
    return;
  }

  it.each(CALLERS)("as %s, in its own organization and another's", async (caller) => {
    expect(e, `no matrix expectation for ${key}`).toBeDefined();
    const p = e as ProtectedExpectation;
    for (const other of p.scope === "resource" ? [false, true] : [false]) {
      const caller_ = p.destructive ? await setupWorld(`Fresh ${caller}`, { database: false }) : A;
      const target = other ? B : caller_;
      const req = await p.request({ world: target, caller, other });
      const res = await api(gw.url, req.path, {
        method: route.method,
        token: tokenOf(caller_, caller),
        body: req.body ?? (route.method === "GET" || route.method === "DELETE" ? undefined : {}),
      });
      const want = expected(p, caller, other);
      const where = `${caller} → ${other ? "another organization's" : "own"} ${req.path}: ${res.text}`;
      expect(res.status, where).toBe(want.status);
      if (want.code) expect(res.body.error.code, where).toBe(want.code);
      if (want.status < 300 && p.list) {
        const items: Array<{ id: string }> = res.body.data[p.list];
        expect(
          items.some((i) => caller_.ids.has(i.id)),
          `${where}: own items listed`,
        ).toBe(true);
        expect(
          items.filter((i) => B.ids.has(i.id)),
          `${where}: another organization's items`,
        ).toEqual([]);
      }
    }
  });
});

describe("API keys: whose each caller sees (docs/product.md, Identity)", () => {
  it.each(["owner", "admin", "developer", "viewer"] as const)("as %s", async (role) => {
    const res = await api(gw.url, "/v1/organization/api-keys?per_page=100", { token: A.users[role].token });
    expect(res.status).toBe(200);
    const creators = new Set((res.body.data.api_keys as Array<{ created_by: string }>).map((k) => k.created_by));
    if (role === "owner" || role === "admin") {
      // settings:write: everyone's, the other members' keys included.
      for (const other of ["developer", "viewer"] as const) expect(creators.has(A.users[other].id), other).toBe(true);
    } else {
      expect([...creators]).toEqual([A.users[role].id]);
    }
  });
});
