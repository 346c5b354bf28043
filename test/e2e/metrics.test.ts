/**
 * Issue 13, metrics: the real stack with the agent sampling every second. A
 * workload through the database's published port (the agent's proxy) shows up
 * in GET /v1/databases/{id}/metrics: transactions per second, the data
 * directory's bytes, the connections by state and the bytes sent, every point
 * on a step bucket; the API's refusals are 422s naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { connectCustomer } from "../support/pgclient.ts";
import { startStack, type Stack } from "../support/stack.ts";

let meta: TestDatabase;
let stack: Stack;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_metrics");
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1", env: { AGENT_SAMPLE_INTERVAL_MS: "1000" } });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

type Point = [number, number];
interface Series {
  labels: Record<string, string>;
  points: Point[];
}

describe("GET /v1/databases/{id}/metrics on the real stack", { timeout: 240_000 }, () => {
  it("shows a workload: transactions per second, storage, connections and bytes sent", async () => {
    const api = createApi(stack.baseUrl);
    await api.signup("metrics");
    const created = await api.post("/v1/databases", { name: "measured", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    const { id, connection_string } = created.body.data;
    await until(
      "running",
      async () => ((await api.get(`/v1/databases/${id}`)).body.data?.status === "running" ? true : undefined),
      120_000,
    );

    const client = await connectCustomer(connection_string);
    await client.query("CREATE TABLE t (id int PRIMARY KEY, v text)");
    // A few seconds of small transactions, so several sample intervals see them.
    const until5s = Date.now() + 5_000;
    for (let i = 0; Date.now() < until5s; i++) await client.query("INSERT INTO t VALUES ($1, repeat('x', 200))", [i]);
    await client.query("SELECT * FROM t");

    const metrics = await until("the workload in the metrics", async () => {
      const res = await api.get(
        `/v1/databases/${id}/metrics?names=transactions_per_second,storage_bytes,connections,network_bytes_per_second`,
      );
      expect(res.status).toBe(200);
      const by = Object.fromEntries(res.body.data.metrics.map((m: { name: string; series: Series[] }) => [m.name, m.series]));
      const max = (s: Series | undefined) => Math.max(0, ...(s?.points ?? []).map((p) => p[1]));
      const tps = max(by.transactions_per_second[0]);
      const out = max(by.network_bytes_per_second.find((s: Series) => s.labels.direction === "out"));
      const idle = max(by.connections.find((s: Series) => s.labels.state === "idle"));
      return tps > 5 && out > 0 && idle >= 1 ? { body: res.body.data, by } : undefined;
    });
    await client.end();

    expect(metrics.body.step).toBe(60);
    expect(Date.parse(metrics.body.end) - Date.parse(metrics.body.start)).toBe(3600_000);
    const storage = metrics.by.storage_bytes[0] as Series;
    expect(storage.points.length).toBeGreaterThan(0);
    // A fresh PostgreSQL 17 data directory is tens of MB.
    expect(storage.points.at(-1)![1]).toBeGreaterThan(10_000_000);
    for (const s of Object.values(metrics.by).flat() as Series[]) for (const [t] of s.points) expect(t % 60).toBe(0);

    const bad = await api.get(`/v1/databases/${id}/metrics?names=disk_iops`);
    expect(bad.status).toBe(422);
    expect(bad.body.error.details[0].field).toBe("names");
    expect(bad.body.error.details[0].message).toContain("transactions_per_second");
    const tooMany = await api.get(`/v1/databases/${id}/metrics?start=2025-01-01T00:00:00Z&end=2025-01-08T00:00:00Z&step=60`);
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.details[0].field).toBe("step");
  });
});
