import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import {
  BackupState,
  DesiredState,
  HeldSlotSchema,
  type InstanceObservation,
  type InstanceSpec,
  InstanceSpecSchema,
  ObservedState,
} from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import { type Fixture, managerFor, shutdown, startFixture, view } from "../backups/support.ts";
import {
  agentSql,
  freePort,
  instanceSpec,
  randomPassword,
  reconcilerFor,
  replicaSourceOf,
  running as runningIn,
  scramVerifier,
  waitFor,
} from "../support/fixture.ts";

// A standby of a highly available database keeps a slot for each other member of its primary (here a read
// replica), advanced to where that member reported its WAL, so that once the standby is promoted the member can
// follow it from where it was instead of being seeded again because the new primary had recycled the WAL it
// needs (docs/decisions.md, "Standbys hold slots for the other members"). On real PostgreSQL 17: a primary, a
// standby, a replica that stops while the primary writes on; the standby's restartpoint removes the WAL before the
// replica's position and keeps the rest; the standby promoted by adoption; the replica pointed at it streams.

const SECRET = "held-slots-test-secret";
const STANDBY = "node-heldstandby";
const REPLICA = "rep-heldreplica";
const NEW_PRIMARY = "db-heldpromoted";
const SLOT_S = "dbaas_node_heldstandby";
const SLOT_R = "dbaas_rep_heldreplica";
const SEGMENT = 16n * 1024n * 1024n;

/** The WAL segment file holding `lsn` on timeline `tli` (16 MB segments). */
const segmentFile = (tli: number, lsn: bigint) => {
  const seg = lsn / SEGMENT;
  const hex = (n: bigint | number) => n.toString(16).toUpperCase().padStart(8, "0");
  return hex(tli) + hex(seg / 256n) + hex(seg % 256n);
};

/** "X/Y" as bytes from 0/0. */
const bytes = (lsn: string) => {
  const [hi, lo] = lsn.split("/");
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`);
};

describe("a standby's slots for the other members", { timeout: 300_000 }, () => {
  let fx: Fixture;
  let backups: BackupManager;
  let reconciler: Reconciler;
  const reports: InstanceObservation[] = [];

  const latest = (id: string) => reconciler.observations().find((o) => o.databaseId === id);
  const desire = (specs: InstanceSpec[]) => {
    reconciler.setDesired(specs);
    backups.setDesired(specs);
  };
  const running = (id: string, generation: bigint) => runningIn(reconciler, id, generation, 120_000);
  /** A SQL probe polled every 250 ms (a connection each time). */
  const until = <T>(probe: () => Promise<T | undefined | false>, ms: number, what: string) =>
    waitFor(
      async () => {
        const v = await probe();
        if (v === undefined || v === false) await sleep(250);
        return v;
      },
      ms,
      what,
    );

  beforeAll(async () => {
    fx = await startFixture("heldslots", "17", { replicationSecret: SECRET });
    ({ manager: backups } = managerFor(fx));
    await backups.start();
    reconciler = reconcilerFor(fx, { report: (o) => reports.push(o), purgeBackups: (id) => backups.purge(id) });
  });

  afterAll(async () => {
    await reconciler?.drain();
    await shutdown(backups, fx);
  });

  it("holds the WAL a stopped replica needs through the standby's restartpoints and its promotion; the replica follows the new primary", async () => {
    const ca = await fx.runtime.caCertificatePem();
    const password = randomPassword();
    let primary = create(InstanceSpecSchema, {
      ...fx.spec,
      generation: 2n,
      credentialsGeneration: 2n,
      scramVerifier: scramVerifier(password),
      replicationSlots: [SLOT_S, SLOT_R],
    });
    desire([primary]);
    const p = await running(fx.id, 2n);
    await fx.sql("CREATE TABLE acked (id int PRIMARY KEY, pad text); INSERT INTO acked SELECT generate_series(1, 100)");
    const source = (slotName: string, primaryId = fx.id, endpoint = p) =>
      replicaSourceOf(primaryId, endpoint, { ca, slotName, seedBackupId: "bkp-seed" });
    let standby = instanceSpec({
      databaseId: STANDBY,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      standby: true,
      replicaOf: source(SLOT_S),
      standbySlots: [create(HeldSlotSchema, { name: SLOT_R, position: 0n })],
    });
    let replica = instanceSpec({
      databaseId: REPLICA,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      replicaOf: source(SLOT_R),
    });
    backups.setDesired([{ ...primary, backupIds: ["bkp-seed"] }]);
    await waitFor(
      () => view(backups, fx.id)?.backups.find((b) => b.backupId === "bkp-seed" && b.state === BackupState.COMPLETED),
      90_000,
      "seed",
    );
    desire([primary, standby, replica]);
    await running(STANDBY, 1n);
    await running(REPLICA, 1n);
    // Created on the standby (a member that reported nothing yet: reserved where the standby was).
    await until(
      async () => (await agentSql(fx.dataDir, STANDBY, `SELECT 1 FROM pg_replication_slots WHERE slot_name = '${SLOT_R}'`)).length === 1,
      60_000,
      "the replica's slot on the standby",
    );

    // Writes, then the replica stops where it is: that is the position its agent reported last.
    await fx.sql("INSERT INTO acked SELECT g, repeat('x', 1000) FROM generate_series(101, 3000) g");
    const target = String((await fx.sql("SELECT pg_current_wal_lsn()::text AS l"))[0]!.l);
    await until(
      async () => (await agentSql(fx.dataDir, REPLICA, `SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn AS ok`))[0]?.ok === true,
      60_000,
      "the replica caught up",
    );
    const at = bytes(String((await agentSql(fx.dataDir, REPLICA, "SELECT pg_last_wal_replay_lsn()::text AS l"))[0]!.l));
    replica = create(InstanceSpecSchema, { ...replica, generation: 2n, desiredState: DesiredState.STOPPED });
    standby = create(InstanceSpecSchema, { ...standby, standbySlots: [create(HeldSlotSchema, { name: SLOT_R, position: at })] });
    desire([primary, standby, replica]);
    await waitFor(() => latest(REPLICA)?.state === ObservedState.STOPPED && latest(REPLICA)!.observedGeneration === 2n, 60_000, "stopped");
    // Advanced to the start of the replica's segment.
    const held = await until(
      async () => {
        const [r] = await agentSql(
          fx.dataDir,
          STANDBY,
          `SELECT (restart_lsn - '0/0')::text AS b FROM pg_replication_slots WHERE slot_name = '${SLOT_R}'`,
        );
        return r && BigInt(String(r.b)) === at - (at % SEGMENT) && at - (at % SEGMENT);
      },
      60_000,
      "the slot advanced to the replica's segment",
    );

    // The primary writes on through several segments and checkpoints; the standby's restartpoint removes old WAL.
    for (let i = 0; i < 4; i++) {
      await fx.sql(`INSERT INTO acked SELECT g, repeat('y', 1000) FROM generate_series(${10_000 + i * 1000}, ${10_999 + i * 1000}) g`);
      await fx.sql("SELECT pg_switch_wal()");
    }
    await fx.sql("CHECKPOINT");
    const after = String((await fx.sql("SELECT pg_current_wal_lsn()::text AS l"))[0]!.l);
    await until(
      async () => (await agentSql(fx.dataDir, STANDBY, `SELECT pg_last_wal_replay_lsn() >= '${after}'::pg_lsn AS ok`))[0]?.ok === true,
      60_000,
      "the standby caught up",
    );
    await agentSql(fx.dataDir, STANDBY, "CHECKPOINT");
    const names = (await agentSql(fx.dataDir, STANDBY, "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' ORDER BY name")).map(
      (r) => String(r.name),
    );
    // The restartpoint removed what was before the replica's segment and kept that segment: the slot held it.
    expect(names[0]).toBe(segmentFile(1, held));

    // The primary is lost; the standby is promoted (its data directory adopted) with the replica's slot.
    primary = create(InstanceSpecSchema, { ...primary, generation: 3n, desiredState: DesiredState.STOPPED });
    desire([primary, standby, replica]);
    await waitFor(() => latest(fx.id)?.state === ObservedState.STOPPED, 60_000, "old primary stopped");
    const promoted = instanceSpec({
      databaseId: NEW_PRIMARY,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      adoptInstanceId: STANDBY,
      replicationSlots: [SLOT_R],
    });
    desire([primary, promoted, replica]);
    const n = await running(NEW_PRIMARY, 1n);
    const [slot] = await agentSql(
      fx.dataDir,
      NEW_PRIMARY,
      `SELECT (restart_lsn - '0/0')::text AS b FROM pg_replication_slots WHERE slot_name = '${SLOT_R}'`,
    );
    expect(BigInt(String(slot?.b))).toBe(held);
    await agentSql(fx.dataDir, NEW_PRIMARY, "INSERT INTO acked VALUES (100000, 'after the failover')");

    // The replica, pointed at the new primary from where it stopped, streams: no re-seed.
    replica = create(InstanceSpecSchema, {
      ...replica,
      generation: 3n,
      desiredState: DesiredState.RUNNING,
      replicaOf: source(SLOT_R, NEW_PRIMARY, n),
    });
    desire([primary, promoted, replica]);
    const heartbeat = setInterval(() => reconciler.resync(), 1000);
    try {
      await running(REPLICA, 3n);
      await until(
        async () => (await agentSql(fx.dataDir, REPLICA, "SELECT count(*)::int AS n FROM acked WHERE id = 100000"))[0]?.n === 1,
        120_000,
        "the new primary's write on the replica",
      );
    } finally {
      clearInterval(heartbeat);
    }
    expect(reports.filter((r) => r.databaseId === REPLICA && r.reseed)).toEqual([]);
    expect((await agentSql(fx.dataDir, REPLICA, "SELECT count(*)::int AS n FROM acked"))[0]!.n).toBe(3000 + 4000 + 1);
  });
});
