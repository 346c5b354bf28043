/**
 * The stubs answer nothing the real service would not. Every route of the gateway's route table served by the
 * databases service is driven twice, through one gateway over the stubs and through one whose databases upstream
 * is the real service (its handlers, its migrations, a real PostgreSQL; identity and billing stay the stubs on
 * both sides), and the two answers must agree: the status, and the shape of the body (its keys and their types,
 * the error's code and the fields its details name). Requests are those both can answer without an agent: first
 * every route on an id that names nothing, the collections, a create and the same name again, the catalogue; then
 * (ON_A_DATABASE) the routes of a database that exists but is not running — the inside routes' 409s and 422s, the
 * configuration, replicas, high availability, backups, pooler and trusted sources, then its lifecycle (409 for an
 * operation its status does not allow). Ids and names the stubs fail on
 * purpose (`db-fail…`, `stub-refuses`, …) are injections, not answers, and are not compared.
 */
import { createInternalClient, createLogger, migrate, startServer, type RunningServer } from "@dbaas/kit";
import { AgentService } from "@dbaas/proto/agent";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../services/databases/src/config.ts";
import { createContext, type AppContext } from "../../services/databases/src/context.ts";
import { MIGRATIONS_DIR } from "../../services/databases/src/db/schema.ts";
import { routes } from "../../services/databases/src/routes.ts";
import { ROUTES } from "../src/routes/table.ts";
import { answer, pathNamingNothing } from "./support/conform.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, SECRET, startStubs, type Stubs } from "./support/stubs.ts";

const TOKEN = "tok-conform";
/** The databases service's routes: what this file compares. */
const served = (path: string) => path.startsWith("/v1/databases") || ["/v1/regions", "/v1/tiers", "/v1/versions"].includes(path);

/** Bodies the gateway lets through, per route; a route not named sends none. */
const BODIES: Record<string, unknown[]> = {
  // Made on both sides, then the same name again: a live database's name is taken (409).
  "POST /v1/databases": [
    { name: "conform-one", region: "fsn1", tier: "micro" },
    { name: "conform-one", region: "fsn1", tier: "micro" },
  ],
  "PATCH /v1/databases/:id": [{ name: "renamed" }],
  "POST /v1/databases/:id/resize": [{ tier: "small" }],
  "POST /v1/databases/:id/restore": [{ name: "restored" }],
  "POST /v1/databases/:id/replicas": [{ name: "replica" }],
  "POST /v1/databases/:id/trusted-sources": [{ cidr: "10.0.0.0/8" }],
  "PATCH /v1/databases/:id/pooler": [{ mode: "session" }, { pool_size: 46 }],
};

let stubs: Stubs;
let pg: TestDatabase;
let ctx: AppContext;
let real: RunningServer;
let overStubs: TestGateway;
let overReal: TestGateway;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-conform", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  pg = await createTestDatabase("databases");
  const config = readConfig({
    DATABASE_URL: pg.url,
    INTERNAL_AUTH_SECRET: SECRET,
    BILLING_URL: stubs.billingUrl,
    DATABASE_DOMAIN: "db.example.test",
    IDENTITY_URL: stubs.identityUrl,
  });
  const log = createLogger("databases-conform");
  ctx = await createContext(config, { log });
  await migrate(ctx.pool, config.schema, MIGRATIONS_DIR);
  real = await startServer({ port: 0, routes: routes(ctx), internalSecret: SECRET, log });
  // One agent with room in every region and both versions, as the stub assumes: what is created is placed.
  await createInternalClient(AgentService, real.url, { secret: SECRET, caller: "agent" }).registerAgent({
    agentId: "agent-conform",
    regions: ["fsn1", "nbg1", "hel1"],
    capacity: 10,
    portRangeStart: 20000,
    portRangeEnd: 20999,
    versions: ["17", "16"],
    // Runs poolers, as the stub's databases have one.
    poolerPortOffset: 1000,
    caCertificatePem: "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n",
  });
  overStubs = await startGateway(stubs);
  overReal = await startGateway({ ...stubs, databasesUrl: real.url });
});

afterAll(async () => {
  await overStubs?.close();
  await overReal?.close();
  await real?.close();
  await ctx?.feed.close();
  await ctx?.pool.end();
  await pg?.drop();
  await stubs?.close();
});

const compared = ROUTES.filter((r) => served(r.path));

describe("the databases stub answers as the real databases service does", () => {
  it("covers the databases service's routes of the table", () => {
    expect(compared.length).toBeGreaterThan(20);
  });

  for (const route of compared) {
    const key = `${route.method} ${route.path}`;
    it(key, async () => {
      const path = pathNamingNothing(route);
      const bodies = BODIES[key] ?? [undefined];
      for (const body of bodies) {
        const request = { method: route.method, token: TOKEN, body, conform: false };
        const [stub, service] = await Promise.all([api(overStubs.url, path, request), api(overReal.url, path, request)]);
        expect(answer(stub), `${key} ${JSON.stringify(body) ?? ""}: the stub's answer (left) against the service's`).toEqual(
          answer(service),
        );
      }
    });
  }
});

/**
 * The routes of one database, on a database that exists (issue #25: compared on unknown ids only, the inside
 * stub's 409s, 422s and successes never met the real InsideService). Each side makes its own database; with no
 * agent answering it stays not running (provisioning), which is what can be compared without one: every route
 * that needs a running database (409), names the service refuses whatever the status (422, or 404 for a path
 * name that cannot exist), and what the service answers in any status (the configuration, high availability,
 * backups, pooler, trusted sources, replicas). Answers that need the agent itself (a running database's roles,
 * its log) are not reachable here. Requests go in order, to both sides, so both hold the same records.
 */
const ON_A_DATABASE: [method: string, path: string, body?: unknown][] = [
  // Roles: while not running, 409; the names the service refuses in any status, 422; a path name that cannot be a role, 404.
  ["GET", "/roles"],
  ["POST", "/roles", { name: "app" }],
  ["POST", "/roles", { name: "public" }],
  ["POST", "/roles", { name: "current_user" }],
  ["POST", "/roles", { name: "pg_app" }],
  ["POST", "/roles", { name: "dbaas_app" }],
  ["POST", "/roles", { name: "Bad-Name" }],
  ["POST", "/roles", {}],
  ["DELETE", "/roles/app"],
  ["DELETE", "/roles/dbadmin"],
  ["DELETE", "/roles/pg_app"],
  ["POST", "/roles/app/reset-password"],
  ["POST", "/roles/dbadmin/reset-password"],
  ["POST", "/roles/pg_app/reset-password"],
  // Logical databases.
  ["GET", "/dbs"],
  ["POST", "/dbs", { name: "app" }],
  ["POST", "/dbs", { name: "template1" }],
  ["POST", "/dbs", { name: "pg_app" }],
  ["POST", "/dbs", { name: "app", owner: "none" }],
  ["POST", "/dbs", { name: "app", owner: "pg_owner" }],
  ["DELETE", "/dbs/app"],
  ["DELETE", "/dbs/defaultdb"],
  ["DELETE", "/dbs/pg_app"],
  // Configuration: kept by the service, changed in any status (a stopped server gets it at its start).
  ["GET", "/config"],
  ["PATCH", "/config", { parameters: { work_mem: 4096 } }],
  ["PATCH", "/config", { parameters: { work_mem: "8MB" } }],
  ["PATCH", "/config", { parameters: { work_mem: null } }],
  ["PATCH", "/config", { parameters: { random_page_cost: 2 } }],
  ["PATCH", "/config", { parameters: { no_such_parameter: 1 } }],
  ["PATCH", "/config", { parameters: { work_mem: 999_999_999 } }],
  ["PATCH", "/config", { parameters: { work_mem: 4096, shared_buffers_nonsense: 1 } }],
  ["PATCH", "/config", { parameters: {} }],
  ["GET", "/config"],
  // Extensions.
  ["GET", "/extensions"],
  ["GET", "/extensions?db=template1"],
  ["POST", "/extensions", { name: "pg_trgm" }],
  ["POST", "/extensions", { name: "citext" }],
  ["POST", "/extensions", { name: "plpython3u" }],
  ["POST", "/extensions", { name: "pg_trgm", db: "template1" }],
  ["DELETE", "/extensions/pg_trgm"],
  ["DELETE", "/extensions/pg_trgm?db=template0"],
  // Query statistics.
  ["GET", "/queries"],
  ["GET", "/queries?order_by=calls&limit=5"],
  ["POST", "/queries/reset"],
  // Replicas: of a running database only.
  ["GET", "/replicas"],
  ["POST", "/replicas", { name: "replica" }],
  ["GET", "/replicas/rep-nothing0"],
  // High availability.
  ["GET", "/high-availability"],
  ["PUT", "/high-availability", { standbys: 0, synchronous: false }],
  ["PUT", "/high-availability", { standbys: 0, synchronous: true }],
  ["PUT", "/high-availability", { standbys: 1, synchronous: false }],
  ["POST", "/failover"],
  // Backups.
  ["GET", "/backups"],
  ["POST", "/backups"],
  ["POST", "/restore", { name: "restored" }],
  // Pooler and trusted sources.
  ["GET", "/pooler"],
  ["PATCH", "/pooler", { mode: "session" }],
  ["PATCH", "/pooler", { pool_size: 46 }],
  ["PATCH", "/pooler", { pool_size: 10 }],
  ["GET", "/trusted-sources"],
  ["POST", "/trusted-sources", { cidr: "10.0.0.0/8" }],
  ["POST", "/trusted-sources", { cidr: "10.0.0.0/8" }],
  ["POST", "/trusted-sources", { cidr: "10.0.0.1/8" }],
  ["GET", "/trusted-sources"],
  // The database itself; last, as they change its status. (Its operations and metrics are what agents reported:
  // canned in the stub, none here; compared on an unknown id above.)
  ["GET", ""],
  ["GET", "/ca-certificate"],
  ["PATCH", "", { name: "conform-renamed" }],
  ["POST", "/reset-password"],
  ["POST", "/start"],
  ["POST", "/restart"],
  ["POST", "/resize", { tier: "small" }],
  ["POST", "/stop"],
  ["GET", ""],
  ["DELETE", ""],
  ["GET", ""],
];

describe("on a database that is not running, the stub answers as the real service does", () => {
  const ids = { stub: "", service: "" };
  beforeAll(async () => {
    const body = { name: "conform-inside", region: "fsn1", tier: "micro" };
    const [stub, service] = await Promise.all([
      api(overStubs.url, "/v1/databases", { method: "POST", token: TOKEN, body, conform: false }),
      api(overReal.url, "/v1/databases", { method: "POST", token: TOKEN, body, conform: false }),
    ]);
    expect([stub.status, service.status]).toEqual([201, 201]);
    ids.stub = stub.body.data.id;
    ids.service = service.body.data.id;
  });

  for (const [method, path, body] of ON_A_DATABASE) {
    const key = `${method} /v1/databases/:id${path} ${JSON.stringify(body) ?? ""}`;
    it(key, async () => {
      const request = { method, token: TOKEN, body, conform: false };
      const [stub, service] = await Promise.all([
        api(overStubs.url, `/v1/databases/${ids.stub}${path}`, request),
        api(overReal.url, `/v1/databases/${ids.service}${path}`, request),
      ]);
      expect(answer(stub), `${key}: the stub's answer (left) against the service's`).toEqual(answer(service));
    });
  }
});
