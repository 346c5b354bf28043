import { ConnectError, Code, type Interceptor } from "@connectrpc/connect";
import { startServer, type RunningServer } from "@dbaas/kit";
import { DatabasesService } from "@dbaas/proto/databases";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { routes } from "../../services/databases/src/routes.ts";
import { createHarness, registerAgent, report, type Harness } from "../../services/databases/test/harness.ts";
import { ObservedState } from "@dbaas/proto/agent";
import { api, startGateway, waitForRevocationFeed, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, SECRET, principal, startStubs, type Stubs } from "./support/stubs.ts";

/**
 * Business outcomes that are not the caller's fault, through the gateway's real
 * internal clients to the real databases service on real PostgreSQL: each is
 * answered once (the internal client resends only UNAVAILABLE, which now means
 * "the call did not run"), and the client sees the service's own message.
 */
let stubs: Stubs;
let h: Harness;
/** The databases service as deployed, but its agent confirms nothing within 300 ms. */
let impatient: RunningServer;
/** The same with the default 5 s to confirm, longer than `hurried`'s upstream deadline. */
let patient: RunningServer;
let gw: TestGateway;
let hurried: TestGateway;
const ORG = "org-outcomes";
const TOKEN = "tok-outcomes";
const AGENT = "outcomes-agent";

/** DatabasesService RPCs that reached a handler, by method name. */
let rpcs: string[] = [];
const counting: Interceptor = (next) => async (req) => {
  if (req.service.typeName === DatabasesService.typeName) rpcs.push(req.method.name);
  return await next(req);
};

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: ORG, permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  h = await createHarness();
  await registerAgent(h, AGENT, { regions: ["fsn1"], capacity: 20, ports: [58000, 58099] });
  const serve = (passwordApplyTimeoutMs: number) =>
    startServer({
      port: 0,
      routes: routes({ ...h.ctx, cfg: { ...h.ctx.cfg, passwordApplyTimeoutMs } }),
      internalSecret: SECRET,
      log: h.ctx.log,
      interceptors: [counting],
    });
  impatient = await serve(300);
  patient = await serve(5_000);
  gw = await startGateway({ identityUrl: stubs.identityUrl, databasesUrl: impatient.url, billingUrl: stubs.billingUrl });
  hurried = await startGateway(
    { identityUrl: stubs.identityUrl, databasesUrl: patient.url, billingUrl: stubs.billingUrl },
    { UPSTREAM_TIMEOUT_MS: "1500" },
  );
  await waitForRevocationFeed(gw);
  await waitForRevocationFeed(hurried);
});

afterAll(async () => {
  await hurried?.close();
  await gw?.close();
  await patient?.close();
  await impatient?.close();
  await h?.close();
  await stubs?.close();
});

beforeEach(() => {
  rpcs = [];
  h.billing.standingFailure = undefined;
});

/** A database its agent reported running, created straight through the service. */
async function runningDatabase(): Promise<string> {
  const { database } = await h.dbs.createDatabase({
    organizationId: ORG,
    name: `outcome-${Date.now()}-${Math.random().toString(36).slice(2, 6)}`,
    region: "fsn1",
    tier: "micro",
  });
  await report(h, AGENT, database!.id, ObservedState.RUNNING);
  return database!.id;
}

async function credentialsGeneration(id: string): Promise<number> {
  const { rows } = await h.ctx.pool.query<{ g: string }>("SELECT credentials_generation AS g FROM databases WHERE id = $1", [id]);
  return Number(rows[0]!.g);
}

describe("reset-password whose agent never confirms", () => {
  it("runs once: one new verifier committed, 504 with the service's message saying to reset again", async () => {
    const id = await runningDatabase();
    expect(await credentialsGeneration(id)).toBe(1);
    const res = await api(gw.url, `/v1/databases/${id}/reset-password`, { method: "POST", token: TOKEN });
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe("upstream_timeout");
    expect(res.body.error.message).toMatch(/did not confirm the new password in time/);
    expect(res.body.error.message).toMatch(/reset again/);
    // Before, the handler answered UNAVAILABLE after committing, and the internal client ran it twice more.
    expect(rpcs.filter((m) => m === "ResetPassword")).toEqual(["ResetPassword"]);
    expect(await credentialsGeneration(id)).toBe(2);
  });

  it("answers within the caller's deadline, with its own message rather than the transport's timeout", async () => {
    const id = await runningDatabase();
    const started = Date.now();
    const res = await api(hurried.url, `/v1/databases/${id}/reset-password`, { method: "POST", token: TOKEN });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(res.status).toBe(504);
    expect(res.body.error.message).toMatch(/did not confirm the new password in time/);
    expect(rpcs.filter((m) => m === "ResetPassword")).toHaveLength(1);
    expect(await credentialsGeneration(id)).toBe(2);
  });
});

describe("no capacity, and billing unreachable", () => {
  it("no capacity in a region is a 503 naming version and region, asked once", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "nowhere-db", region: "hel1", tier: "micro" },
    });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe("service_unavailable");
    expect(res.body.error.message).toMatch(/no capacity for PostgreSQL 17 in region hel1/);
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(rpcs.filter((m) => m === "CreateDatabase")).toHaveLength(1);
  });

  it("a standing check billing cannot answer is a 503 saying so, asked once", async () => {
    h.billing.standingFailure = new ConnectError("billing is down at 10.0.0.7", Code.Unavailable);
    const asked = h.billing.standingAsked.length;
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "large-db", region: "fsn1", tier: "large" },
    });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe("service_unavailable");
    expect(res.body.error.message).toBe("could not check the organization's payment method; try again shortly");
    expect(res.text).not.toContain("10.0.0.7");
    expect(rpcs.filter((m) => m === "CreateDatabase")).toHaveLength(1);
    expect(h.billing.standingAsked.length - asked).toBe(1);
  });
});
