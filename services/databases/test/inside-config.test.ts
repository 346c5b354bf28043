import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { TIER_NAMES } from "@dbaas/catalogue";
import type { ConfigParameter } from "@dbaas/proto/inside";
import { InsideService } from "@dbaas/proto/inside";
import { freePortBlock } from "@dbaas/test/support/stack";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Reconciler } from "../../provisioner-agent/src/reconciler.ts";
import { reconcilerFor, startHost, type TestHost } from "../../provisioner-agent/test/support/fixture.ts";
import { routes } from "../src/routes.ts";
import { createDb, createHarness, eventually, expectCode, specOf, statusOf, violationsOf, type Harness } from "./harness.ts";

// The configuration API on real servers: the agent side is the real reconciler and local runtime in this
// process, fed by this service's watch stream and reporting to it, so a PATCH answers only once a real server
// has the change (docs/product.md, Inside the database).

const ORG = "org-config";
const AGENT = "config-agent";

let h: Harness;
let host: TestHost;
let reconciler: Reconciler;
let inside: Client<typeof InsideService>;
const watching = new AbortController();

beforeAll(async () => {
  h = await createHarness({ PASSWORD_APPLY_TIMEOUT_MS: "30000" });
  host = await startHost("dbs-config");
  const base = await freePortBlock(10);
  await h.agents.registerAgent({
    agentId: AGENT,
    regions: ["fsn1"],
    capacity: 10,
    portRangeStart: base,
    portRangeEnd: base + 9,
    versions: ["17"],
    caCertificatePem: "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n",
    publicAddresses: ["127.0.0.1"],
    tierSettings: TIER_NAMES.map((tier) => ({ tier, settings: host.runtime.serverDefaults(tier) })),
  });
  reconciler = reconcilerFor(host, {
    report: (o) => void h.agents.reportInstances({ agentId: AGENT, instances: [o] }).catch(() => {}),
  });
  // The agent's control loop, reduced to its watch: every snapshot becomes the desired state.
  void (async () => {
    for await (const msg of h.agents.watchAssignments({ agentId: AGENT }, { signal: watching.signal }))
      reconciler.setDesired(msg.instances);
  })().catch(() => {});
  inside = createClient(InsideService, createRouterTransport(routes(h.ctx)));
}, 120_000);

afterAll(async () => {
  watching.abort();
  await reconciler?.drain();
  await host?.close();
  await h?.close();
}, 60_000);

const param = (ps: ConfigParameter[], name: string) => {
  const p = ps.find((x) => x.name === name);
  if (!p) throw new Error(`no parameter ${name}`);
  return { ...p, value: toJson(ValueSchema, p.value!), defaultValue: toJson(ValueSchema, p.defaultValue!) };
};
const patch = (id: string, parameters: Record<string, unknown>) =>
  inside.updateConfig({
    organizationId: ORG,
    databaseId: id,
    parameters: Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, fromJson(ValueSchema, v as never)])),
  });
const waitStatus = (id: string, status: string) => eventually(async () => (await statusOf(h, ORG, id)) === status, 90_000);

/** A new session as dbadmin, as customers connect (TLS, SCRAM), and the value it sees of `name`. */
async function show(port: number, password: string, name: string): Promise<string> {
  const c = new pg.Client({
    host: "127.0.0.1",
    port,
    user: "dbadmin",
    password,
    database: "defaultdb",
    ssl: { rejectUnauthorized: false },
  });
  await c.connect();
  try {
    return (await c.query(`SELECT current_setting('${name}') AS v`)).rows[0].v;
  } finally {
    await c.end();
  }
}

describe("configuration on a real server", { timeout: 180_000 }, () => {
  let id: string;
  let port: number;
  let password: string;

  beforeAll(async () => {
    const created = await createDb(h, ORG);
    id = created.database!.id;
    port = created.database!.port;
    password = created.password;
    await waitStatus(id, "running");
  }, 120_000);

  it("GET lists the allowlist with the agent's tier defaults, nothing overridden", async () => {
    const { parameters } = await inside.getConfig({ organizationId: ORG, databaseId: id });
    expect(parameters.length).toBeGreaterThanOrEqual(30);
    const workMem = param(parameters, "work_mem");
    const tierWorkMem = host.runtime.serverDefaults("micro").work_mem!;
    expect(workMem).toMatchObject({ unit: "kB", type: "integer", min: 64, max: 262144, requiresRestart: false, overridden: false });
    expect(`${workMem.defaultValue}kB`).toBe(tierWorkMem.endsWith("MB") ? `${Number.parseInt(tierWorkMem, 10) * 1024}kB` : tierWorkMem);
    expect(workMem.value).toBe(workMem.defaultValue);
    expect(param(parameters, "max_connections")).toMatchObject({ value: 50, defaultValue: 50, max: 50, requiresRestart: true });
    expect(param(parameters, "shared_preload_libraries")).toMatchObject({
      value: ["pg_stat_statements"],
      allowed: ["pg_stat_statements", "auto_explain"],
    });
    expect(await show(port, password, "work_mem")).not.toBe("64MB");
  });

  it("PATCH answers once the running server has it: a new session sees it at once", async () => {
    const res = await patch(id, { work_mem: "64MB", statement_timeout: "5s" });
    expect(param(res.parameters, "work_mem")).toMatchObject({ value: 65536, overridden: true, pendingRestart: false });
    expect(param(res.parameters, "statement_timeout")).toMatchObject({ value: 5000, unit: "ms" });
    expect(await show(port, password, "work_mem")).toBe("64MB");
    expect(await show(port, password, "statement_timeout")).toBe("5s");
  });

  it("a restart-only parameter is pending until a restart", async () => {
    const res = await patch(id, { max_connections: 40 });
    expect(param(res.parameters, "max_connections")).toMatchObject({ value: 40, pendingRestart: true });
    expect(await show(port, password, "max_connections")).toBe("50");
    await h.dbs.restartDatabase({ organizationId: ORG, id });
    await waitStatus(id, "running");
    const after = await eventually(async () => {
      const { parameters } = await inside.getConfig({ organizationId: ORG, databaseId: id });
      return !param(parameters, "max_connections").pendingRestart && parameters;
    }, 30_000);
    expect(param(after, "max_connections").value).toBe(40);
    expect(await show(port, password, "max_connections")).toBe("40");
    expect(await show(port, password, "work_mem")).toBe("64MB");
  });

  it("one refused parameter refuses the whole change (422 naming each), nothing applied", async () => {
    const err = await expectCode(patch(id, { work_mem: "8MB", max_connections: 51, log_statement: "all" }), Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      { field: "parameters.max_connections", message: "must be between 10 and 50 on the micro tier" },
      { field: "parameters.log_statement", message: "is not a parameter that can be changed (GET …/config lists those that can)" },
    ]);
    expect(await show(port, password, "work_mem")).toBe("64MB");
    await expectCode(inside.getConfig({ organizationId: "org-else", databaseId: id }), Code.NotFound);
    await expectCode(patch("db-none", { jit: false }), Code.NotFound);
  });

  it("kept across a resize; a resize the configuration does not fit is 422 naming the tier", async () => {
    await h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "small" });
    await waitStatus(id, "running");
    expect(await show(port, password, "work_mem")).toBe("64MB");
    expect(await show(port, password, "max_connections")).toBe("40");
    await patch(id, { max_connections: 80 });
    const err = await expectCode(h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "micro" }), Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      {
        field: "tier",
        message:
          "the configuration does not fit it: max_connections is set to 80, which must be between 10 and 50 on the micro tier; change it first (PATCH …/config)",
      },
    ]);
  });

  it("a change while stopped answers at once and is there at the next start", async () => {
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    await waitStatus(id, "stopped");
    const res = await patch(id, { work_mem: "32MB", max_connections: 30 });
    expect(param(res.parameters, "max_connections")).toMatchObject({ value: 30, pendingRestart: false });
    await h.dbs.startDatabase({ organizationId: ORG, id });
    await waitStatus(id, "running");
    expect(await show(port, password, "work_mem")).toBe("32MB");
    expect(await show(port, password, "max_connections")).toBe("30");
  });

  it("the agent's spec carries the overrides, normalized, beside their generation", async () => {
    const spec = await specOf(h, AGENT, id);
    expect(spec!.parameters).toEqual({ work_mem: "32768kB", statement_timeout: "5000ms", max_connections: "30" });
    expect(spec!.configGeneration).toBe(4n);
  });
});
