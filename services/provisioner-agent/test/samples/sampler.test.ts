import { createLogger, systemClock } from "@dbaas/kit";
import type { InstanceSample } from "@dbaas/proto/agent";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InstanceManager } from "../../src/instances/instance-manager.ts";
import { createSampler } from "../../src/samples/sampler.ts";
import { connect as login, startHost, startInstance, type TestHost } from "../support/fixture.ts";

// The sampler against a real PostgreSQL 17 instance: a workload moves the counters, gauges and CPU it reports;
// an undelivered round stays pending (bounded) and goes with the next; a stopped instance is not sampled.

describe("sampler (PostgreSQL 17)", { timeout: 90_000 }, () => {
  let host: TestHost;
  let m: InstanceManager;
  let port: number;
  let password: string;
  const id = "smp1";
  const held: pg.Client[] = [];

  const connect = () => login(port, password);

  beforeAll(async () => {
    host = await startHost("samples");
    ({ m } = host);
    ({ port, password } = await startInstance(host, id, { hostname: "smp.example.test" }));
  }, 60_000);

  afterAll(async () => {
    for (const c of held) await c.end().catch(() => {});
    await host?.close();
  }, 60_000);

  const sampler = (sent: InstanceSample[][], o: { fail?: () => boolean; maxPending?: number } = {}) =>
    createSampler({
      instances: host.runtime,
      list: () => m.listInstances(),
      counters: (x) => m.proxy.counters(x),
      send: async (batch) => {
        if (o.fail?.()) throw new Error("databases service unreachable");
        sent.push(batch);
      },
      clock: systemClock,
      log: createLogger("test-samples"),
      ...(o.maxPending !== undefined && { maxPending: o.maxPending }),
    });

  it("reports what a workload did: transactions, rows, blocks, connections by state, CPU, memory, storage", async () => {
    const sent: InstanceSample[][] = [];
    const s = sampler(sent);
    expect(await s.round()).toBe(true);
    const [before] = sent.flat();
    expect(before).toMatchObject({ databaseId: id, cpuPercent: 0, replicationLagBytes: 0n });

    const c = await connect();
    await c.query("CREATE TABLE t (id int PRIMARY KEY, v text)");
    for (let i = 0; i < 50; i++)
      await c.query("INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series($1::int, $1::int + 99) g", [i * 100]);
    await c.query("UPDATE t SET v = 'y' WHERE id < 10");
    await c.query("SELECT count(*) FROM generate_series(1, 3000000)");
    // A backend flushes its statistics at exit (otherwise at most every second, or after 10 s idle).
    await c.end();
    const idle = await connect();
    const idleInTx = await connect();
    held.push(idle, idleInTx);
    await idleInTx.query("BEGIN");
    await idleInTx.query("SELECT 1");

    let after = before!;
    // Polled every 50 ms, for up to 10 s as before.
    for (let i = 0; i < 200 && after.xactCommit - before!.xactCommit < 52n; i++) {
      await new Promise((r) => setTimeout(r, 50));
      await s.round();
      after = sent.flat().at(-1)!;
    }
    expect(after.sampleId).not.toBe(before!.sampleId);
    expect(after.xactCommit - before!.xactCommit).toBeGreaterThanOrEqual(52n);
    expect(after.tupInserted - before!.tupInserted).toBeGreaterThanOrEqual(5000n);
    expect(after.tupUpdated - before!.tupUpdated).toBeGreaterThanOrEqual(10n);
    expect(after.blksHit + after.blksRead).toBeGreaterThan(before!.blksHit + before!.blksRead);
    expect(after.connectionsIdle).toBeGreaterThanOrEqual(1);
    expect(after.connectionsIdleInTransaction).toBe(1);
    // The 3-million-row scan ran between the first sample and the second.
    expect(sent.flat()[1]!.cpuPercent).toBeGreaterThan(0);
    expect(after.memoryBytes).toBeGreaterThan(1_000_000n);
    // The workload's connections went through the proxy, which counted them in one epoch.
    expect(after.countersEpoch).not.toBe("");
    expect(after.networkBytesIn - (before!.countersEpoch === after.countersEpoch ? before!.networkBytesIn : 0n)).toBeGreaterThan(5_000n);
    expect(after.networkBytesOut).toBeGreaterThan(0n);
    expect(after.storageBytes).toBeGreaterThan(before!.storageBytes);
    expect(after.storageBytes).toBeGreaterThan(10_000_000n);
    await idleInTx.query("ROLLBACK");
  });

  it("keeps undelivered samples for the next round, oldest dropped beyond the bound", async () => {
    const sent: InstanceSample[][] = [];
    let failing = true;
    const s = sampler(sent, { fail: () => failing, maxPending: 2 });
    expect(await s.round()).toBe(false);
    expect(await s.round()).toBe(false);
    expect(await s.round()).toBe(false);
    expect(s.pending()).toBe(2);
    failing = false;
    expect(await s.round()).toBe(true);
    // The bound holds two: rounds 1 and 2 were dropped for 3 and 4, delivered in order.
    expect(sent.flat().map((x) => Number(x.sampleId.split("-").at(-1)))).toEqual([3, 4]);
    expect(s.pending()).toBe(0);
  });

  it("samples only running instances", async () => {
    await m.stop(id);
    const sent: InstanceSample[][] = [];
    expect(await sampler(sent).collect()).toEqual([]);
  });
});
