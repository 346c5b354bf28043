import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { AgentService, type InstanceSample, InstanceSampleSchema } from "@dbaas/proto/agent";
import { DatabasesService } from "@dbaas/proto/databases";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { rebuildMinutes } from "../src/db/samples.ts";
import { routes } from "../src/routes.ts";
import { createHarness, registerAgent, resetTables, runningDb, type Harness } from "./harness.ts";

// The per-minute aggregates ReportSamples keeps: whatever order samples arrive in, each minute is what the
// samples stored say, so a late sample corrects its successor's interval.

let h: Harness;
const AGENT = "mi-a";
const ORG = "org-mi";
const MINUTE = 60_000;
const T0 = new Date(Math.floor(Date.now() / 3600_000) * 3600_000 - 3 * 3600_000);

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

let dbId: string;
beforeEach(async () => {
  await resetTables(h);
  await registerAgent(h, AGENT);
  dbId = (await runningDb(h, ORG, AGENT)).database!.id;
});

/** Sample `i` at T0 + `atS` seconds: 60 transactions and 3000 bytes in per 30 s, unless told otherwise. */
function sample(i: number, atS: number, o: Omit<Partial<InstanceSample>, "$typeName" | "$unknown"> = {}): InstanceSample {
  const n = BigInt(atS / 30);
  return create(InstanceSampleSchema, {
    databaseId: dbId,
    sampleId: `s-${i}`,
    sampledAt: timestampFromDate(new Date(T0.getTime() + atS * 1000)),
    countersEpoch: "e1",
    storageBytes: 1000n + BigInt(i),
    networkBytesIn: n * 3000n,
    networkBytesOut: n * 6000n,
    cpuPercent: i,
    xactCommit: n * 60n,
    blksHit: n * 9n,
    blksRead: n,
    ...o,
  });
}

const report = (samples: InstanceSample[]) =>
  createClient(AgentService, createRouterTransport(routes(h.ctx))).reportSamples({ agentId: AGENT, samples });
const minutes = async () =>
  (await h.ctx.pool.query("SELECT * FROM sample_minutes WHERE database_id = $1 ORDER BY minute", [dbId])).rows.map((r) => ({
    ...r,
    minute: (r.minute as Date).getTime() - T0.getTime(),
  }));
const tps = async (toS: number) => {
  const res = await createClient(DatabasesService, createRouterTransport(routes(h.ctx))).getMetrics({
    organizationId: ORG,
    databaseId: dbId,
    start: timestampFromDate(T0),
    end: timestampFromDate(new Date(T0.getTime() + toS * 1000)),
    stepSeconds: 60,
    names: ["transactions_per_second"],
  });
  const s = res.metrics[0]!.series[0]!;
  return s.unixSeconds.map((t, i) => [(Number(t) * 1000 - T0.getTime()) / MINUTE, s.values[i]]);
};

describe("ReportSamples' minutes", () => {
  it("a late sample makes the intervals on both sides of it, across a gap that had none", async () => {
    await report([sample(0, 0), sample(2, 20 * 60)]);
    // 20 minutes apart: no interval, so no rate, only the gauges of each minute.
    expect(await tps(30 * 60)).toEqual([]);
    expect((await minutes()).map((m) => [m.minute / MINUTE, m.samples, m.stat_seconds])).toEqual([
      [0, 1, 0],
      [20, 1, 0],
    ]);
    await report([sample(1, 10 * 60)]);
    expect(await tps(30 * 60)).toEqual([
      [10, 2],
      [20, 2],
    ]);
  });

  it("a late sample inside an interval splits it: the minute of its successor loses what the late one now ends", async () => {
    // 0 s, 30 s, 90 s: the interval 30→90 ends in minute 1.
    await report([sample(0, 0), sample(1, 30), sample(3, 90)]);
    expect((await minutes()).map((m) => [m.minute / MINUTE, m.stat_seconds, m.xacts])).toEqual([
      [0, 30, 60],
      [1, 60, 120],
    ]);
    // 60 s arrives: 30→60 ends in minute 1 as well, 60→90 too; a resend changes nothing.
    await report([sample(2, 60)]);
    await report([sample(2, 60), sample(1, 30)]);
    expect((await minutes()).map((m) => [m.minute / MINUTE, m.samples, m.stat_seconds, m.xacts])).toEqual([
      [0, 2, 30, 60],
      [1, 2, 60, 120],
    ]);
    // A late sample whose successor is in the next minute: 180 s (90 s after 90 s), then 150 s.
    await report([sample(6, 180)]);
    expect((await minutes()).slice(2)).toMatchObject([{ minute: 3 * MINUTE, samples: 1, stat_seconds: 90, xacts: 180 }]);
    await report([sample(5, 150)]);
    expect((await minutes()).slice(2)).toMatchObject([
      { minute: 2 * MINUTE, samples: 1, stat_seconds: 60, xacts: 120, network_seconds: 60, network_bytes_in: 6000 },
      { minute: 3 * MINUTE, samples: 1, stat_seconds: 30, xacts: 60, network_seconds: 30, network_bytes_in: 3000 },
    ]);
  });

  it("samples in any order, in any batches, leave the minutes a rebuild from scratch computes", async () => {
    // 90 samples every 30 s with a new byte epoch, a statistics reset and a 16-minute hole among them.
    const all = [...Array(90).keys()].map((i) => {
      const atS = i * 30 + (i >= 60 ? 16 * 60 : 0);
      if (i >= 20 && i < 30) return sample(i, atS, { countersEpoch: "e2", networkBytesIn: BigInt(i - 20) * 500n });
      if (i >= 40) return sample(i, atS, { xactCommit: BigInt(i - 40) * 7n, blksHit: BigInt(i - 40), blksRead: 0n });
      return sample(i, atS);
    });
    // A fixed shuffle (a linear congruential generator), then batches of 1 to 7.
    let seed = 13;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const shuffled = [...all];
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
    }
    for (let i = 0; i < shuffled.length; ) {
      const n = 1 + Math.floor(random() * 7);
      await report(shuffled.slice(i, i + n));
      i += n;
    }
    const incremental = await minutes();
    // Minutes 0-29 and 46-60, two samples each.
    expect(incremental.map((m) => m.samples)).toEqual(Array(45).fill(2));
    await h.ctx.pool.query("DELETE FROM sample_minutes");
    await rebuildMinutes(h.ctx.pool, T0, new Date(T0.getTime() + 2 * 3600_000));
    expect(incremental).toEqual(await minutes());
    // The reset (sample 40) and the hole (sample 60) end no interval; the epoch change leaves the statistics alone.
    const points = await tps(61 * 60);
    expect(points.length).toBe(45);
    expect(points.filter(([m]) => m === 10 || m === 20 || m === 46)).toEqual([
      [10, 2],
      [20, 7 / 30],
      [46, 7 / 30],
    ]);
  });
});
