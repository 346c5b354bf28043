import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import type { Clock } from "@dbaas/kit";
import { AgentService, type InstanceSample, InstanceSampleSchema } from "@dbaas/proto/agent";
import { DatabasesService, type GetMetricsResponse } from "@dbaas/proto/databases";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AppContext } from "../src/context.ts";
import { METRIC_NAMES } from "../src/metrics/catalogue.ts";
import { maintainSamples } from "../src/metrics/retention.ts";
import { routes } from "../src/routes.ts";
import { createHarness, expectCode, registerAgent, resetTables, runningDb, violationsOf, type Harness } from "./harness.ts";

// Samples reported by agents, the metrics computed from them, and their roll-ups and purge, with the clock injected.

let h: Harness;
const AGENT = "smp-a";
const OTHER_AGENT = "smp-b";
const ORG = "org-smp";
const HOUR = 3600_000;
// An hour boundary, so buckets of every step line up with the samples below.
const T0 = new Date(Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR);

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

const fixed = (t: Date): Clock => ({ now: () => t });
const at = (t: Date): AppContext => ({ ...h.ctx, clock: fixed(t) });
const dbsAt = (t: Date) => createClient(DatabasesService, createRouterTransport(routes(at(t))));
const agentsAt = (t: Date) => createClient(AgentService, createRouterTransport(routes(at(t))));

let dbId: string;
beforeEach(async () => {
  await resetTables(h);
  await registerAgent(h, AGENT);
  await registerAgent(h, OTHER_AGENT);
  dbId = (await runningDb(h, ORG, AGENT)).database!.id;
});

/**
 * Sample `i`, at T0 + 30 s × i: 60 transactions, 30 inserts,
 * 90 block hits and 10 reads, 3000 bytes in and 6000 out each interval.
 */
function sample(i: number, o: Omit<Partial<InstanceSample>, "$typeName" | "$unknown"> = {}): InstanceSample {
  return create(InstanceSampleSchema, {
    databaseId: dbId,
    sampleId: `s-${i}`,
    sampledAt: timestampFromDate(new Date(T0.getTime() + i * 30_000)),
    countersEpoch: "e1",
    storageBytes: BigInt(1_000_000 + i * 1000),
    networkBytesIn: BigInt(i * 3000),
    networkBytesOut: BigInt(i * 6000),
    cpuPercent: i % 2 === 0 ? 10 : 30,
    memoryBytes: 50_000_000n,
    connectionsActive: 2,
    connectionsIdle: 5,
    connectionsIdleInTransaction: 1,
    xactCommit: BigInt(i * 50),
    xactRollback: BigInt(i * 10),
    tupFetched: BigInt(i * 300),
    tupInserted: BigInt(i * 30),
    blksHit: BigInt(i * 90),
    blksRead: BigInt(i * 10),
    deadlocks: BigInt(Math.floor(i / 4)),
    walArchiveLagSeconds: 4,
    ...o,
  });
}

const reportAt = (t: Date, samples: InstanceSample[], agentId = AGENT) => agentsAt(t).reportSamples({ agentId, samples });
const count = async (sql: string) => (await h.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`)).rows[0]!.n;
const series = (res: GetMetricsResponse, name: string, label?: [string, string]) => {
  const m = res.metrics.find((x) => x.name === name)!;
  const s = m.series.find((x) => (label ? x.labels[label[0]] === label[1] : true))!;
  // Only the packed columns: the deprecated one-message-per-point form is not sent as well.
  expect(s.points).toEqual([]);
  expect(s.values.length).toBe(s.unixSeconds.length);
  return s.unixSeconds.map((t, i) => [Number(t) - T0.getTime() / 1000, s.values[i]]);
};
const metrics = (t: Date, o: { fromS?: number; toS?: number; step?: number; names?: string[] } = {}) =>
  dbsAt(t).getMetrics({
    organizationId: ORG,
    databaseId: dbId,
    start: timestampFromDate(new Date(T0.getTime() + (o.fromS ?? 0) * 1000)),
    end: timestampFromDate(new Date(T0.getTime() + (o.toS ?? 3599) * 1000)),
    stepSeconds: o.step ?? 60,
    names: o.names ?? [],
  });

describe("ReportSamples", () => {
  it("records each sample once, queues it once for billing, and ignores databases on other agents", async () => {
    const now = new Date(T0.getTime() + HOUR);
    const batch = [0, 1, 2].map((i) => sample(i));
    await reportAt(now, batch);
    await reportAt(now, batch);
    await reportAt(now, [sample(3), ...batch]);
    expect(await count("samples")).toBe(4);
    const { rows } = await h.ctx.pool.query("SELECT payload FROM outbox WHERE topic = 'database.usage' ORDER BY id");
    expect(rows.map((r) => r.payload.sample_id)).toEqual(["s-0", "s-1", "s-2", "s-3"]);
    expect(rows[3].payload).toMatchObject({
      organization_id: ORG,
      database_id: dbId,
      storage_bytes: "1003000",
      counters_epoch: "e1",
      network_bytes_in: "9000",
      network_bytes_out: "18000",
    });
    await reportAt(now, [sample(9)], OTHER_AGENT);
    expect(await count("samples")).toBe(4);
    await expectCode(reportAt(now, [sample(10)], "smp-unknown"), Code.NotFound);
  });
});

describe("GetMetrics", () => {
  it("computes rates from deltas, averages gauges per bucket, and the units and labels of every name", async () => {
    await reportAt(
      T0,
      [...Array(10).keys()].map((i) => sample(i)),
    );
    const res = await metrics(new Date(T0.getTime() + HOUR), { toS: 299 });
    expect(res.stepSeconds).toBe(60);
    expect(res.metrics.map((m) => m.name)).toEqual(METRIC_NAMES);
    // Samples 0..9 at 0..270 s: buckets 0..240; the first bucket's first sample has no interval before it.
    expect(series(res, "transactions_per_second")).toEqual([
      [0, 2],
      [60, 2],
      [120, 2],
      [180, 2],
      [240, 2],
    ]);
    expect(series(res, "rows_per_second", ["op", "fetched"])[1]).toEqual([60, 10]);
    expect(series(res, "rows_per_second", ["op", "inserted"])[1]).toEqual([60, 1]);
    expect(series(res, "rows_per_second", ["op", "deleted"])[1]).toEqual([60, 0]);
    expect(series(res, "cache_hit_ratio")[2]).toEqual([120, 0.9]);
    expect(series(res, "network_bytes_per_second", ["direction", "in"])[3]).toEqual([180, 100]);
    expect(series(res, "network_bytes_per_second", ["direction", "out"])[3]).toEqual([180, 200]);
    expect(series(res, "cpu_percent")[0]).toEqual([0, 20]);
    expect(series(res, "storage_bytes")[1]).toEqual([60, 1_002_500]);
    expect(series(res, "connections", ["state", "idle_in_transaction"])[4]).toEqual([240, 1]);
    // deadlocks go 0,0,0,0,1,1,1,1,2,2: the interval ending at sample 4 (bucket 120) and the one ending at 8 (bucket 240).
    expect(series(res, "deadlocks")).toEqual([
      [0, 0],
      [60, 0],
      [120, 1],
      [180, 0],
      [240, 1],
    ]);
    const units = Object.fromEntries(res.metrics.map((m) => [m.name, m.unit]));
    expect(units).toMatchObject({
      cpu_percent: "percent",
      storage_bytes: "bytes",
      cache_hit_ratio: "ratio",
      wal_archive_lag_seconds: "seconds",
    });
    expect(res.metrics.find((m) => m.name === "connections")!.series.map((s) => s.labels.state)).toEqual([
      "active",
      "idle",
      "idle_in_transaction",
    ]);
  });

  it("skips intervals across a new epoch or a statistics reset, and leaves out buckets without samples", async () => {
    const reset = (i: number) =>
      sample(i, { xactCommit: BigInt(i), xactRollback: 0n, tupFetched: 0n, tupInserted: 0n, blksHit: 0n, blksRead: 0n });
    await reportAt(T0, [
      sample(0),
      sample(1),
      // A new proxy epoch at sample 2: its byte counters restarted.
      sample(2, { countersEpoch: "e2", networkBytesIn: 100n, networkBytesOut: 100n }),
      sample(3, { countersEpoch: "e2", networkBytesIn: 3100n, networkBytesOut: 6100n }),
      // PostgreSQL's statistics reset at sample 4.
      reset(4),
      reset(5),
      // Nothing from 180 s to 600 s.
      sample(20),
      sample(21),
    ]);
    const res = await metrics(new Date(T0.getTime() + HOUR), { toS: 659 });
    // Bucket 0: intervals 0-1 (valid). Bucket 60: 1-2 (new epoch: bytes skipped), 2-3 (valid). Bucket 120: 3-4 (reset: stats skipped), 4-5.
    expect(series(res, "network_bytes_per_second", ["direction", "in"])).toEqual([
      [0, 100],
      [60, 100],
      [120, 100],
      [600, 100],
    ]);
    expect(series(res, "transactions_per_second")).toEqual([
      [0, 2],
      [60, 2],
      [120, 1 / 30],
      // Sample 20 follows sample 5 by 450 s (one long interval, counters back up: valid); 21 follows 20.
      [600, (20 * 60 - 5 + 60) / 480],
    ]);
    expect(series(res, "storage_bytes").map(([t]) => t)).toEqual([0, 60, 120, 600]);
  });

  it("rejects bad ranges, steps and names, naming the field; an unknown or foreign database is not found", async () => {
    const now = new Date(T0.getTime() + HOUR);
    const fields = async (p: Promise<unknown>) => violationsOf(await expectCode(p, Code.InvalidArgument));
    expect(await fields(metrics(now, { step: 59 }))).toEqual([{ field: "step", message: "must be at least 60 seconds" }]);
    expect((await fields(metrics(now, { fromS: 100, toS: 50 })))[0]!.field).toBe("start");
    const [names] = await fields(metrics(now, { names: ["cpu_percent", "disk_iops"] }));
    expect(names!.field).toBe("names");
    expect(names!.message).toContain('"disk_iops"');
    for (const n of METRIC_NAMES) expect(names!.message).toContain(n);
    // 1,000 one-minute buckets fit; one more does not.
    await metrics(now, { fromS: 0, toS: 999 * 60 + 59 });
    const [points] = await fields(metrics(now, { fromS: 0, toS: 1000 * 60 }));
    expect(points!.field).toBe("step");
    await expectCode(dbsAt(now).getMetrics({ organizationId: "org-other", databaseId: dbId, names: [] }), Code.NotFound);
  });

  it("defaults to the last hour at 60 s and the names asked for, in their order", async () => {
    const now = new Date(T0.getTime() + 300_000);
    await reportAt(now, [sample(0), sample(1), sample(2)]);
    const res = await dbsAt(now).getMetrics({ organizationId: ORG, databaseId: dbId, names: ["storage_bytes", "cpu_percent"] });
    expect(Number(res.end!.seconds) - Number(res.start!.seconds)).toBe(3600);
    expect(res.stepSeconds).toBe(60);
    expect(res.metrics.map((m) => m.name)).toEqual(["storage_bytes", "cpu_percent"]);
    expect(series(res, "storage_bytes")).toEqual([
      [0, 1_000_500],
      [60, 1_002_000],
    ]);
  });
});

describe("roll-ups and purge", () => {
  it("rolls up whole hours, serves data older than 7 days from them, and purges samples at 7 days and roll-ups at 30", async () => {
    // Two hours of samples from T0, every 30 s.
    await reportAt(
      T0,
      [...Array(240).keys()].map((i) => sample(i)),
    );
    // Ten minutes into the next hour: the first hour is whole, the second not yet.
    expect((await maintainSamples(at(new Date(T0.getTime() + HOUR + 600_000)))).rolledUp).toBe(1);
    await maintainSamples(at(new Date(T0.getTime() + 2 * HOUR + 600_000)));
    expect(await count("sample_rollups")).toBe(2);

    const eightDays = new Date(T0.getTime() + 8 * 24 * HOUR);
    await maintainSamples(at(eightDays));
    expect(await count("samples")).toBe(0);
    expect(await count("sample_rollups")).toBe(2);
    const res = await metrics(eightDays, { toS: 2 * 3600 - 1, step: 3600 });
    // The first sample of all has no interval: 119 intervals in hour one; hour two's first spans the hour boundary.
    expect(series(res, "transactions_per_second")).toEqual([
      [0, 2],
      [3600, 2],
    ]);
    expect(series(res, "cache_hit_ratio")).toEqual([
      [0, 0.9],
      [3600, 0.9],
    ]);
    expect(series(res, "storage_bytes")).toEqual([
      [0, 1_000_000 + 59.5 * 1000],
      [3600, 1_000_000 + 179.5 * 1000],
    ]);

    await maintainSamples(at(new Date(T0.getTime() + 31 * 24 * HOUR)));
    expect(await count("sample_rollups")).toBe(0);
  });
});
