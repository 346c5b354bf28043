/**
 * The stubs answer nothing the real service would not. Every route of the gateway's route table served by the
 * databases service is driven twice, through one gateway over the stubs and through one whose databases upstream
 * is the real service (its handlers, its migrations, a real PostgreSQL; identity and billing stay the stubs on
 * both sides), and the two answers must agree: the status, and the shape of the body (its keys and their types,
 * the error's code and the fields its details name). Requests are those both can answer without an agent: an id
 * that names nothing, the collections, a create and the same name again, the catalogue. Ids and names the stubs
 * fail on purpose (`db-fail…`, `stub-refuses`, …) are injections, not answers, and are not compared.
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
