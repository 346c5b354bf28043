import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { createLogger } from "@dbaas/kit";
import {
  BackupState,
  type InstanceObservation,
  type InstanceSpec,
  InstanceSpecSchema,
  ObservedState,
  ReplicaSourceSchema,
} from "@dbaas/proto/agent";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { streamingOnly } from "../../src/instances/fencing.ts";
import { createInstanceManager } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { createLeaseKeeper, fenceOnStart } from "../../src/leases.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import { type Fixture, managerFor, shutdown, startFixture, view } from "../backups/support.ts";
import {
  connect,
  freePort,
  instanceSpec,
  query,
  randomPassword,
  reconcilerFor,
  running as runningIn,
  scramVerifier,
  waitFor,
} from "../support/fixture.ts";

// High availability on real instances, driven the way the agent drives them (docs/product.md, High availability):
// a standby streams from its primary but its port is never served; the primary's synchronous_standby_names follow
// its spec by a reload; fencing ends client sessions and refuses new ones while replication goes on, survives a
// restart, and is lifted by a renewed lease (the lease keeper on a clock the test moves); an old primary left by a
// failover is discarded (data and spool gone, its backups kept); primaries that needed a lease are fenced at start.

const SECRET = "ha-test-secret";
const STANDBY = "node-hastandby";
const SLOT = "dbaas_node_hastandby";

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** The error a client's connection attempt fails with ("" when it connects). */
async function refusal(port: number, password: string): Promise<string> {
  try {
    const c = await connect(port, password);
    await c.end();
    return "";
  } catch (e) {
    return (e as Error).message;
  }
}

describe("standbys and fencing on real instances", { timeout: 240_000 }, () => {
  let fx: Fixture;
  let backups: BackupManager;
  let reconciler: Reconciler;
  const reports: InstanceObservation[] = [];
  let primary: InstanceSpec;
  let standby: InstanceSpec;
  let password: string;

  const latest = (id: string) => reconciler.observations().find((o) => o.databaseId === id);
  const desire = (specs: InstanceSpec[]) => {
    reconciler.setDesired(specs);
    backups.setDesired(specs);
  };
  const running = (id: string, generation: bigint) => runningIn(reconciler, id, generation);

  beforeAll(async () => {
    fx = await startFixture("ha", "17", { replicationSecret: SECRET });
    ({ manager: backups } = managerFor(fx));
    await backups.start();
    password = randomPassword();
    reconciler = reconcilerFor(fx, {
      report: (o) => reports.push(o),
      purgeBackups: (id) => backups.purge(id),
      discardBackups: (id) => backups.purge(id, { keepStore: true }),
    });
    primary = create(InstanceSpecSchema, {
      ...fx.spec,
      generation: 2n,
      credentialsGeneration: 2n,
      scramVerifier: scramVerifier(password),
      replicationSlots: [SLOT],
      leaseRequired: true,
    });
    standby = instanceSpec({
      databaseId: STANDBY,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      standby: true,
      replicaOf: create(ReplicaSourceSchema, {
        primaryDatabaseId: fx.id,
        primaryHost: fx.spec.host,
        primaryCaPem: await fx.runtime.caCertificatePem(),
        slotName: SLOT,
        primaryVersion: "17",
      }),
    });
  });

  afterAll(async () => {
    await reconciler?.drain();
    await shutdown(backups, fx);
  });

  it("a standby streams from its primary, reports its WAL position, and its port is never served", async () => {
    desire([primary]);
    const p = await running(fx.id, 2n);
    await query(fx.port, password, "CREATE TABLE acked (id int PRIMARY KEY); INSERT INTO acked SELECT generate_series(1, 100)");
    standby.replicaOf!.primaryAddress = p.replicationAddress;
    standby.replicaOf!.primaryPort = p.replicationPort;
    desire([{ ...primary, backupIds: ["bkp-seed"] }, standby]);
    await waitFor(
      () => view(backups, fx.id)?.backups.find((b) => b.backupId === "bkp-seed" && b.state === BackupState.COMPLETED),
      90_000,
      "seed",
    );
    standby.replicaOf!.seedBackupId = "bkp-seed";
    desire([primary, standby]);
    const s = await running(STANDBY, 1n);
    expect(s.walPosition).toBeGreaterThan(0n);
    expect(s.fenced).toBe(false);
    // Streaming (its start waits for that), yet nobody reaches it on its published port.
    const wal = await fx.m.agentConnection(STANDBY);
    expect(wal).toBeDefined();
    expect(await accepts(standby.port)).toBe(false);
    expect(await readFile(path.join(fx.dataDir, "instances", STANDBY, "dbaas.conf"), "utf8")).toMatch(/^# unpublished/m);
    // The primary reports its write position too, at or past the standby's.
    await reconciler.refreshWalPositions();
    expect(latest(fx.id)!.walPosition).toBeGreaterThanOrEqual(latest(STANDBY)!.walPosition);
  });

  it("synchronous_standby_names follow the primary's spec by a reload (no restart); commits are acknowledged by the standby", async () => {
    const pid = (
      await fx.sql("SELECT pg_backend_pid() AS p, (SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer') AS c")
    )[0]!.c;
    // A standby the spec names that does not stream from this server (after a failover: one still following the
    // old primary) is left out, or the primary would wait for it forever.
    primary = create(InstanceSpecSchema, { ...primary, synchronousStandbyNames: `ANY 1 ("node-elsewhere", "${STANDBY}")` });
    desire([primary, standby]);
    await waitFor(
      async () => (await fx.sql("SHOW synchronous_standby_names"))[0]!.synchronous_standby_names === `ANY 1 ("${STANDBY}")`,
      30_000,
      "sync names",
    );
    // The same server: a reload, not a restart.
    expect((await fx.sql("SELECT pid AS c FROM pg_stat_activity WHERE backend_type = 'checkpointer'"))[0]!.c).toBe(pid);
    await waitFor(
      async () => (await fx.sql("SELECT sync_state FROM pg_stat_replication"))[0]?.sync_state === "quorum",
      30_000,
      "quorum standby",
    );
    await query(fx.port, password, "INSERT INTO acked VALUES (101)");
    expect(streamingOnly(`ANY 1 ("a", "b")`, new Set(["b", "c"]))).toBe(`ANY 1 ("b")`);
    expect(streamingOnly(`ANY 1 ("a")`, new Set())).toBe("");
    expect(streamingOnly("", new Set(["a"]))).toBe("");
    primary = create(InstanceSpecSchema, { ...primary, synchronousStandbyNames: "" });
    desire([primary, standby]);
    await waitFor(async () => (await fx.sql("SHOW synchronous_standby_names"))[0]!.synchronous_standby_names === "", 30_000, "async again");
  });

  it("fencing ends client sessions and refuses new ones, replication goes on; a restart comes up fenced; unfencing lets clients in", async () => {
    const client: pg.Client = await connect(fx.port, password);
    expect((await client.query("SELECT 1 AS one")).rows[0].one).toBe(1);
    await fx.runtime.fence(fx.id);
    expect(fx.runtime.isFenced(fx.id)).toBe(true);
    // The open session was ended; a new one is refused by pg_hba, before any password.
    await expect(client.query("SELECT 1")).rejects.toThrow();
    await client.end().catch(() => {});
    expect(await refusal(fx.port, password)).toMatch(/no pg_hba\.conf entry/);
    // The standby still streams and receives what the agent writes.
    await fx.sql("CREATE TABLE written_while_fenced (x int); INSERT INTO written_while_fenced VALUES (1)");
    const lsn = String((await fx.sql("SELECT pg_current_wal_lsn() AS l"))[0]!.l);
    await waitFor(
      async () => (await fx.sql(`SELECT replay_lsn >= '${lsn}'::pg_lsn AS ok FROM pg_stat_replication`))[0]?.ok === true,
      30_000,
      "standby caught up while fenced",
    );
    // The observation says so at once.
    reconciler.touch(fx.id);
    await waitFor(() => latest(fx.id)?.fenced === true, 10_000, "fenced reported");
    expect(reports.some((r) => r.databaseId === fx.id && r.fenced)).toBe(true);
    // A restart (a new generation) comes up fenced: running, no client admitted.
    primary = create(InstanceSpecSchema, { ...primary, generation: 3n });
    desire([primary, standby]);
    await running(fx.id, 3n);
    expect(await refusal(fx.port, password)).toMatch(/no pg_hba\.conf entry/);
    await fx.runtime.unfence(fx.id);
    expect(fx.runtime.isFenced(fx.id)).toBe(false);
    expect(await query(fx.port, password, "SELECT count(*)::int AS n FROM acked")).toEqual([{ n: 101 }]);
  });

  it("the lease keeper fences before the lease ends unrenewed, unfences on renewal, and fences a switchover's primary regardless", async () => {
    let t = 0;
    let grant: string[] = [fx.id];
    const keeper = createLeaseKeeper({
      runtime: fx.runtime,
      renew: async () => ({ databaseIds: grant, leaseMillis: 10_000 }),
      log: createLogger("leases-test"),
      dataDir: fx.dataDir,
      renewIntervalMs: 2000,
      fenceMarginMs: 3000,
      fencedAtStart: [],
      onFencingChanged: (id) => reconciler.touch(id),
      now: () => t,
    });
    keeper.setDesired([primary, standby], []);
    await keeper.renewOnce();
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(false);
    // Granted at t=0 for 10 s: still writable 3 s before the end, fenced from then on (renewals failing meanwhile).
    t = 6_999;
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(false);
    t = 7_001;
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(true);
    expect(await refusal(fx.port, password)).toMatch(/no pg_hba\.conf entry/);
    // Renewed: clients are let in again.
    t = 8_000;
    await keeper.renewOnce();
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(false);
    expect(await refusal(fx.port, password)).toBe("");
    // A renewal that no longer grants it (a failover moved the lease): fenced at once.
    grant = [];
    t = 9_000;
    await keeper.renewOnce();
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(true);
    grant = [fx.id];
    await keeper.renewOnce();
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(false);
    // A switchover's spec fences it whatever the lease; the standby is never fenced.
    keeper.setDesired([{ ...primary, fenced: true }, standby], []);
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(true);
    expect(fx.runtime.isFenced(STANDBY)).toBe(false);
    keeper.setDesired([primary, standby], []);
    await keeper.tick();
    expect(fx.runtime.isFenced(fx.id)).toBe(false);
    // What it keeps for the next start: the primaries that need a lease.
    expect(JSON.parse(await readFile(path.join(fx.dataDir, "leases", "fence-on-start.json"), "utf8"))).toEqual([fx.id]);
  });

  it("an agent that starts again fences the primaries that needed a lease before anything is served", async () => {
    // A second manager over the same data directory stands for the next agent process (its fencing is in memory).
    const m = createInstanceManager({
      dataDir: fx.dataDir,
      agentId: "test-ha",
      store: fx.store,
      replicationSecret: SECRET,
      proxy: fx.m.proxy,
    });
    const runtime = createLocalProcessRuntime(m);
    expect(await fenceOnStart(runtime, fx.dataDir, createLogger("leases-test"))).toEqual([fx.id]);
    expect(runtime.isFenced(fx.id)).toBe(true);
    expect(await refusal(fx.port, password)).toMatch(/no pg_hba\.conf entry/);
    await runtime.unfence(fx.id);
    expect(await refusal(fx.port, password)).toBe("");
  });

  it("an old primary left by a failover is discarded: fenced, its data and spool gone, PURGED reported, its backups kept", async () => {
    const stored = (await fx.store.list(`${fx.id}/`)).length;
    expect(stored).toBeGreaterThan(0);
    // The standby is promoted elsewhere (the test's: it goes), and this host's spec no longer has the primary.
    desire([]);
    reconciler.setDiscards([fx.id]);
    await waitFor(() => reports.find((r) => r.databaseId === fx.id && r.state === ObservedState.PURGED), 60_000, "discard reported");
    expect(existsSync(path.join(fx.dataDir, "instances", fx.id))).toBe(false);
    expect(existsSync(fx.spoolDir)).toBe(false);
    expect((await fx.store.list(`${fx.id}/`)).length).toBeGreaterThanOrEqual(stored);
    expect(await accepts(fx.port)).toBe(false);
  });
});
