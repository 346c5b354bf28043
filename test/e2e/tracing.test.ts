/**
 * One trace covers a public request: the gateway's server span, its internal
 * Connect call, the databases service's server span, their PostgreSQL and
 * Redis calls, and the agent's work on the database the request changed,
 * exported over OTLP by separate processes and joined by W3C trace context
 * (the agent's through the spec it watches).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { createApi, waitFor } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { type CollectedSpan, type Collector, startCollector } from "../support/otlp-collector.ts";
import { startStack, type Stack } from "../support/stack.ts";

let collector: Collector;
let spans: CollectedSpan[];
let stack: Stack;
let meta: TestDatabase;

beforeAll(async () => {
  collector = await startCollector();
  spans = collector.spans;
  meta = await createTestDatabase("e2e_tracing");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: {
      ...collector.env,
      REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
  collector?.close();
});

it("joins gateway and databases spans of one request into the caller's trace", async () => {
  const api = createApi(stack.baseUrl);
  await api.signup("trace");
  const created = await api.post("/v1/databases", { name: "traced", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);

  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const res = await api.get(`/v1/databases/${created.body.data.id}`, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
  expect(res.status).toBe(200);

  const trace = await waitFor(
    async () => {
      const t = spans.filter((s) => s.traceId === traceId);
      return t.some((s) => s.service === "databases") && t.some((s) => s.service === "gateway" && s.kind === 3) ? t : undefined;
    },
    30_000,
    "spans of the trace",
  );

  const root = trace.find((s) => s.service === "gateway" && s.kind === 2)!; // SERVER
  expect(root.parentSpanId).toBe("00f067aa0ba902b7");
  const client = trace.find((s) => s.service === "gateway" && s.kind === 3 && s.name.endsWith("DatabasesService/GetDatabase"))!; // CLIENT
  expect(client.parentSpanId).toBe(root.spanId);
  const server = trace.find((s) => s.service === "databases" && s.name.endsWith("DatabasesService/GetDatabase"))!;
  expect(server.parentSpanId).toBe(client.spanId);
  // The gateway's auth call to identity belongs to the same trace (or was served from its cache).
  for (const s of trace.filter((x) => x.service === "identity")) expect(s.traceId).toBe(traceId);
});

// Each test's own timeout is the sum of its waits and a margin: a wait that sticks fails naming itself.
it("covers a create from the gateway through the databases service and PostgreSQL to the agent's instance ready", {
  timeout: 120_000 + 10_000 + 15_000,
}, async () => {
  const api = createApi(stack.baseUrl);
  await api.signup("trace-create");
  const traceId = "0af7651916cd43dd8448eb211c80319c";
  const caller = "b7ad6b7169203331";
  const created = await api.post(
    "/v1/databases",
    { name: "traced-create", region: "fsn1", tier: "micro" },
    { traceparent: `00-${traceId}-${caller}-01`, "idempotency-key": "trace-create-1" },
  );
  expect(created.status).toBe(201);

  const of = (service: string, name: string) => spans.find((s) => s.traceId === traceId && s.service === service && s.name === name);
  await waitFor(
    async () => of("provisioner-agent", "instance ready") && of("provisioner-agent", "reconcile"),
    120_000,
    "the agent's spans",
  );
  // Every span's parent is in the trace (but the caller's): waited for, since each process exports in its own batches.
  const orphans = () => {
    const trace = spans.filter((s) => s.traceId === traceId);
    const ids = new Set(trace.map((s) => s.spanId));
    return trace.filter((s) => s.parentSpanId !== caller && !(s.parentSpanId && ids.has(s.parentSpanId)));
  };
  await waitFor(async () => orphans().length === 0, 10_000, "every parent exported").catch(() => {});
  expect(orphans().map((s) => `${s.service} ${s.name}`)).toEqual([]);

  const trace = spans.filter((s) => s.traceId === traceId);
  const children = (parent: CollectedSpan) => trace.filter((s) => s.parentSpanId === parent.spanId);
  const root = trace.find((s) => s.service === "gateway" && s.kind === 2)!; // SERVER
  expect(root.parentSpanId).toBe(caller);
  expect(trace.filter((s) => s.parentSpanId === caller)).toEqual([root]);

  // Gateway: its Redis calls (the idempotency claim) and the internal call, children of the request's span.
  const redis = children(root).filter((s) => s.attributes["db.system"] === "redis");
  expect(redis.length).toBeGreaterThan(0);
  for (const s of redis) expect(s.kind).toBe(3); // CLIENT
  const client = children(root).find((s) => s.kind === 3 && s.name.endsWith("DatabasesService/CreateDatabase"))!;
  expect(client).toBeDefined();

  // Databases: its server span continues the gateway's call; its PostgreSQL calls (the insert among them) are its children.
  const server = children(client).find((s) => s.service === "databases" && s.name.endsWith("DatabasesService/CreateDatabase"))!;
  expect(server).toBeDefined();
  const queries = children(server).filter((s) => s.attributes["db.system"] === "postgresql");
  expect(queries.some((q) => String(q.attributes["db.statement"]).startsWith("INSERT INTO databases"))).toBe(true);

  // Agent: its work on the new database continues the request that asked for it, and ends with the instance ready.
  const reconcile = trace.find((s) => s.service === "provisioner-agent" && s.name === "reconcile")!;
  expect(trace.find((s) => s.spanId === reconcile.parentSpanId)?.service).toBe("databases");
  expect(children(reconcile).map((s) => s.name)).toEqual(expect.arrayContaining(["provision", "start", "instance ready"]));
  expect(reconcile.attributes["dbaas.database_id"]).toBe(created.body.data.id);
  // Statements carry no values: the new password is nowhere in the trace.
  const password: string = created.body.data.password;
  expect(password.length).toBeGreaterThan(0);
  expect(JSON.stringify(trace)).not.toContain(password);
});

it("puts the agent's backup in the trace of the request that asked for it", { timeout: 2 * 180_000 + 15_000 }, async () => {
  const api = createApi(stack.baseUrl);
  await api.signup("trace-backup");
  const created = await api.post("/v1/databases", { name: "traced-backup", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);
  const id = created.body.data.id;
  // The first (scheduled) backup follows the first start; one at a time, so the request waits for it to finish.
  await waitFor(
    async () => {
      const list = await api.get(`/v1/databases/${id}/backups`);
      const backups: { status: string }[] = list.body.data?.backups ?? [];
      return backups.length > 0 && backups.every((b) => b.status !== "running");
    },
    180_000,
    "the first backup",
  );

  const traceId = "5b8aa5a2d2c872e8321cf37308d69df2";
  const caller = "051581bf3cb55c13";
  const asked = await api.post(`/v1/databases/${id}/backups`, {}, { traceparent: `00-${traceId}-${caller}-01` });
  expect(asked.status).toBe(202);

  const backup = await waitFor(
    async () => spans.find((s) => s.traceId === traceId && s.service === "provisioner-agent" && s.name === "backup"),
    180_000,
    "the agent's backup span",
  );
  expect(backup.attributes["dbaas.backup_id"]).toBe(asked.body.data.id);
  const parent = spans.find((s) => s.spanId === backup.parentSpanId)!;
  expect(parent.service).toBe("databases");
  expect(parent.name).toMatch(/DatabasesService\/CreateBackup$/);
  expect(spans.filter((s) => s.parentSpanId === backup.spanId).map((s) => s.name)).toContain("base backup");
});

it("shows where a configuration change's time goes: the checks, the save, the wait, the agent's ALTER SYSTEM and reload", {
  timeout: 120_000 + 30_000 + 15_000,
}, async () => {
  const api = createApi(stack.baseUrl);
  await api.signup("trace-config");
  const created = await api.post("/v1/databases", { name: "traced-config", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);
  const id: string = created.body.data.id;
  await waitFor(async () => (await api.get(`/v1/databases/${id}`)).body.data?.status === "running", 120_000, "running");

  const traceId = "7d3c1f0e9b8a46c2a1b2c3d4e5f60718";
  const caller = "1a2b3c4d5e6f7081";
  const patched = await api.patch(
    `/v1/databases/${id}/config`,
    { parameters: { work_mem: "12MB" } },
    { traceparent: `00-${traceId}-${caller}-01` },
  );
  expect(patched.status).toBe(200);

  const of = (service: string, name: string) => spans.find((s) => s.traceId === traceId && s.service === service && s.name === name);
  await waitFor(async () => of("provisioner-agent", "reload") && of("databases", "wait for the agent"), 30_000, "the change's spans");
  const trace = spans.filter((s) => s.traceId === traceId);
  const parentOf = (s: CollectedSpan) => trace.find((p) => p.spanId === s.parentSpanId);
  const server = trace.find((s) => s.service === "databases" && s.name.endsWith("/UpdateConfig"))!;
  expect(server).toBeDefined();
  for (const step of ["validate", "save", "wait for the agent"]) expect(parentOf(of("databases", step)!)).toBe(server);
  // The agent's apply joins the request's trace through the spec; its steps are children of its configuration step.
  const reconcile = of("provisioner-agent", "reconcile")!;
  expect(parentOf(reconcile)?.service).toBe("databases");
  const configuration = of("provisioner-agent", "configuration")!;
  expect(parentOf(configuration)).toBe(reconcile);
  for (const step of ["alter system", "reload"]) expect(parentOf(of("provisioner-agent", step)!)).toBe(configuration);
});
