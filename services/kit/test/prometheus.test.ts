import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import {
  createInternalClient,
  createLogger,
  createMetricsRegistry,
  createPool,
  outboxMetrics,
  Registry,
  startServer,
  type RunningServer,
} from "../src/index.ts";

// Both of startServer's paths (the unary fast path and connect-node) must be
// measured, and the exposition must reach Prometheus, which scrapes over HTTP/1.1.

const SECRET = "prometheus-test-secret";

async function authenticate(req: { bearer: string }) {
  if (req.bearer === "missing") throw new ConnectError("no such bearer", Code.NotFound);
  return { principal: { userId: req.bearer, organizationId: "org-1" } };
}

async function* watchRevocations() {
  for (let i = 0; i < 2; i++) yield { event: { case: "revocation" as const, value: { organizationId: `org-${i}` } } };
}

const servers: RunningServer[] = [];

async function serve(fastPath: boolean) {
  const metrics = createMetricsRegistry();
  const server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("prometheus-test"),
    fastPath,
    metrics,
    routes: (router) => router.service(IdentityService, { authenticate, watchRevocations }),
  });
  servers.push(server);
  return { server, client: createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "test" }) };
}

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

/** The value of one sample line of an exposition, or undefined when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] ?? "").split(",");
    if (want.every((w) => have.includes(w))) return Number(m[3]);
  }
  return undefined;
}

async function scrapeHttp1(server: RunningServer): Promise<{ type: string | null; text: string }> {
  const res = await fetch(`${server.url}/metrics`);
  expect(res.status).toBe(200);
  return { type: res.headers.get("content-type"), text: await res.text() };
}

function scrapeHttp2(server: RunningServer, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(server.url);
    session.on("error", reject);
    const req = session.request({ ":path": path });
    let status = 0;
    let text = "";
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("data", (d: Buffer) => (text += d.toString()));
    req.on("end", () => {
      session.close();
      resolve({ status, text });
    });
    req.on("error", reject);
    req.end();
  });
}

const AUTH = { service: "dbaas.identity.v1.IdentityService", method: "Authenticate" };

describe.each([
  ["the unary fast path", true],
  ["connect-node", false],
])("RPC metrics through %s", (_name, fastPath) => {
  let server: RunningServer;
  let client: Awaited<ReturnType<typeof serve>>["client"];
  beforeAll(async () => {
    ({ server, client } = await serve(fastPath));
  });

  it("counts each call by its code and observes its duration", async () => {
    const before = (await scrapeHttp1(server)).text;
    expect(sample(before, "rpc_requests_total", { ...AUTH, code: "ok" })).toBeUndefined();
    await client.authenticate({ bearer: "usr-1" });
    await client.authenticate({ bearer: "usr-2" });
    await expect(client.authenticate({ bearer: "missing" })).rejects.toThrow();
    const { type, text } = await scrapeHttp1(server);
    expect(type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sample(text, "rpc_requests_total", { ...AUTH, code: "ok" })).toBe(2);
    expect(sample(text, "rpc_requests_total", { ...AUTH, code: "not_found" })).toBe(1);
    expect(sample(text, "rpc_duration_seconds_count", AUTH)).toBe(3);
    expect(sample(text, "rpc_duration_seconds_bucket", { ...AUTH, le: "+Inf" })).toBe(3);
    expect(sample(text, "rpc_duration_seconds_sum", AUTH)).toBeGreaterThan(0);
    // Default process metrics come with every registry made by createMetricsRegistry.
    expect(sample(text, "process_cpu_user_seconds_total", {})).toBeGreaterThan(0);
  });

  it("counts a call refused before its handler (no credential)", async () => {
    const anonymous = createInternalClient(IdentityService, server.url, { secret: "not-the-secret", caller: "test" });
    await expect(anonymous.authenticate({ bearer: "usr-1" })).rejects.toThrow();
    const { text } = await scrapeHttp1(server);
    expect(sample(text, "rpc_requests_total", { ...AUTH, code: "unauthenticated" })).toBe(1);
  });

  it("counts a stream when it ends", async () => {
    const seen: string[] = [];
    for await (const msg of client.watchRevocations({})) seen.push(msg.event.case ?? "");
    expect(seen).toHaveLength(2);
    const { text } = await scrapeHttp1(server);
    expect(sample(text, "rpc_requests_total", { service: AUTH.service, method: "WatchRevocations", code: "ok" })).toBe(1);
  });

  it("serves /metrics and /healthz over HTTP/2 too, and 404 beside them over HTTP/1.1", async () => {
    const h2 = await scrapeHttp2(server, "/metrics");
    expect(h2.status).toBe(200);
    expect(sample(h2.text, "rpc_requests_total", { ...AUTH, code: "ok" })).toBe(2);
    expect((await scrapeHttp2(server, "/healthz")).status).toBe(200);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/nothing`)).status).toBe(404);
    // An RPC path over HTTP/1.1 is not an RPC: only the plain endpoints answer there.
    expect((await fetch(`${server.url}/dbaas.identity.v1.IdentityService/Authenticate`, { method: "POST" })).status).toBe(404);
  });
});

describe("a server without a registry", () => {
  it("answers /metrics 404 and /healthz over HTTP/1.1", async () => {
    const server = await startServer({ port: 0, internalSecret: SECRET, log: createLogger("prometheus-test"), routes: () => {} });
    servers.push(server);
    expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});

describe("outbox metrics", () => {
  let db: TestDatabase;
  let pool: ReturnType<typeof createPool>;
  beforeAll(async () => {
    db = await createTestDatabase("kit_prom");
    pool = createPool(db.url, "public", 2);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it("reads the depth and the oldest pending row's age when scraped, NaN while the query fails", async () => {
    await pool.query("CREATE TABLE outbox (id serial, created_at timestamptz NOT NULL, delivered_at timestamptz)");
    const registry = new Registry();
    outboxMetrics(registry, pool, { table: "outbox", pending: "delivered_at IS NULL" });
    let text = await registry.metrics();
    expect(sample(text, "outbox_depth", {})).toBe(0);
    expect(sample(text, "outbox_oldest_age_seconds", {})).toBe(0);
    await pool.query(
      "INSERT INTO outbox (created_at, delivered_at) VALUES (now() - interval '90 seconds', NULL), (now() - interval '10 seconds', NULL), (now() - interval '1 hour', now())",
    );
    text = await registry.metrics();
    expect(sample(text, "outbox_depth", {})).toBe(2);
    const age = sample(text, "outbox_oldest_age_seconds", {})!;
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThan(3600);
    await pool.query("DROP TABLE outbox");
    text = await registry.metrics();
    expect(sample(text, "outbox_depth", {})).toBeNaN();
  });
});
