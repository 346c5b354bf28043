import { create } from "@bufbuild/protobuf";
import {
  BackupState,
  DesiredState,
  type InstanceObservation,
  type InstanceSpec,
  InstanceSpecSchema,
  ObservedState,
} from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import { readLog } from "../../src/server-log/reader.ts";
import { divergenceIn } from "../../src/timeline-divergence.ts";
import { type Fixture, managerFor, shutdown, view } from "../backups/support.ts";
import { startFixture } from "../backups/support.ts";
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

// A read replica that replayed WAL its old primary wrote after the promoted standby's last position can never follow
// the new primary's timeline (no pg_rewind in the server binaries): its agent finds what the server logged, stops it
// and reports it for a new seed (not running); once the databases service takes its seed away its data goes, and a
// seed of the new primary brings it back, streaming the new primary's writes (docs/decisions.md, "A replica that
// cannot follow the new primary is re-seeded"). On real PostgreSQL 17: a primary, a standby held back (its slot dropped, so
// it receives nothing more), a replica that got everything, the standby promoted by adoption (a new timeline).

const SECRET = "diverged-test-secret";
const STANDBY = "node-divstandby";
const REPLICA = "rep-divreplica";
const NEW_PRIMARY = "db-divpromoted";
const SLOT_S = "dbaas_node_divstandby";
const SLOT_R = "dbaas_rep_divreplica";

describe("a replica past the new primary's timeline", { timeout: 300_000 }, () => {
  let fx: Fixture;
  let backups: BackupManager;
  let reconciler: Reconciler;
  const reports: InstanceObservation[] = [];
  let password: string;

  const latest = (id: string) => reconciler.observations().find((o) => o.databaseId === id);
  const desire = (specs: InstanceSpec[]) => {
    reconciler.setDesired(specs);
    backups.setDesired(specs);
  };
  const running = (id: string, generation: bigint) => runningIn(reconciler, id, generation, 120_000);
  const seeded = (id: string, backupId: string) =>
    waitFor(() => view(backups, id)?.backups.find((b) => b.backupId === backupId && b.state === BackupState.COMPLETED), 90_000, backupId);

  beforeAll(async () => {
    fx = await startFixture("diverged", "17", { replicationSecret: SECRET });
    ({ manager: backups } = managerFor(fx));
    await backups.start();
    password = randomPassword();
    reconciler = reconcilerFor(fx, {
      report: (o) => reports.push(o),
      purgeBackups: (id) => backups.purge(id),
    });
  });

  afterAll(async () => {
    await reconciler?.drain();
    await shutdown(backups, fx);
  });

  it("reads only what the server logged since its latest start", () => {
    const forked = {
      message: "new timeline 2 forked off current database system timeline 1 before current recovery point 0/7000AA8",
      detail: "",
    };
    const start = { message: "starting PostgreSQL 17.2 on x86_64-pc-linux-gnu", detail: "" };
    const notChild = {
      message: "requested timeline 2 is not a child of this server's history",
      detail:
        "Latest checkpoint is at 0/7000B20 on timeline 1, but in the history of the requested timeline, the server forked off from that timeline at 0/7000A00.",
    };
    expect(divergenceIn([start, forked])).toBe(forked.message);
    expect(divergenceIn([forked])).toBe(forked.message);
    expect(
      divergenceIn([forked, start, { message: "started streaming WAL from primary at 0/8000000 on timeline 2", detail: "" }]),
    ).toBeUndefined();
    expect(divergenceIn([start, notChild])).toBe(`${notChild.message} (${notChild.detail})`);
    expect(divergenceIn([{ message: "new timeline 2 forked off current database system timeline 1", detail: "" }])).toBeUndefined();
    // Seen on the three-host stack: it followed the new timeline, but the new primary had removed the WAL it needed.
    const removed = {
      message: "could not receive data from WAL stream: ERROR:  requested WAL segment 000000020000000000000004 has already been removed",
      detail: "",
    };
    expect(divergenceIn([start, { message: "started streaming WAL from primary at 0/4000000 on timeline 2", detail: "" }, removed])).toBe(
      removed.message,
    );
    expect(divergenceIn([removed, start])).toBeUndefined();
  });

  it("is stopped and reported for a new seed, discarded when its seed is taken away, and seeded from the new primary", async () => {
    const ca = await fx.runtime.caCertificatePem();
    let primary = create(InstanceSpecSchema, {
      ...fx.spec,
      generation: 2n,
      credentialsGeneration: 2n,
      scramVerifier: scramVerifier(password),
      replicationSlots: [SLOT_S, SLOT_R],
    });
    desire([primary]);
    const p = await running(fx.id, 2n);
    await fx.sql("CREATE TABLE acked (id int PRIMARY KEY); INSERT INTO acked SELECT generate_series(1, 100)");
    const source = (slotName: string, primaryId = fx.id, endpoint = p) =>
      replicaSourceOf(primaryId, endpoint, { ca, slotName, seedBackupId: "bkp-seed" });
    const standby = instanceSpec({
      databaseId: STANDBY,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      standby: true,
      replicaOf: source(SLOT_S),
    });
    let replica = instanceSpec({
      databaseId: REPLICA,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      replicaOf: source(SLOT_R),
    });
    backups.setDesired([{ ...primary, backupIds: ["bkp-seed"] }]);
    await seeded(fx.id, "bkp-seed");
    desire([primary, standby, replica]);
    await running(STANDBY, 1n);
    await running(REPLICA, 1n);

    // The standby receives nothing more (its slot goes); the replica gets every later write, then the primary is lost.
    primary = create(InstanceSpecSchema, { ...primary, replicationSlots: [SLOT_R] });
    desire([primary, standby, replica]);
    await waitFor(
      async () => (await fx.sql(`SELECT 1 FROM pg_replication_slots WHERE slot_name = '${SLOT_S}'`)).length === 0,
      30_000,
      "slot gone",
    );
    await fx.sql("INSERT INTO acked SELECT generate_series(101, 200)");
    const lsn = String((await fx.sql("SELECT pg_current_wal_lsn() AS l"))[0]!.l);
    await waitFor(
      async () => (await agentSql(fx.dataDir, REPLICA, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS ok`))[0]?.ok === true,
      30_000,
      "the replica ahead of the standby",
    );
    expect((await agentSql(fx.dataDir, STANDBY, "SELECT count(*)::int AS n FROM acked"))[0]!.n).toBe(100);
    primary = create(InstanceSpecSchema, { ...primary, generation: 3n, desiredState: DesiredState.STOPPED });
    desire([primary, standby, replica]);
    await waitFor(() => latest(fx.id)?.state === ObservedState.STOPPED, 60_000, "old primary stopped");

    // The standby is promoted (a new timeline, forked before what the replica replayed) and the replica pointed at it.
    let promoted = instanceSpec({
      databaseId: NEW_PRIMARY,
      port: await freePort(),
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      adoptInstanceId: STANDBY,
      replicationSlots: [SLOT_R],
    });
    desire([primary, promoted, replica]);
    const n = await running(NEW_PRIMARY, 1n);
    await agentSql(fx.dataDir, NEW_PRIMARY, "INSERT INTO acked SELECT generate_series(1001, 1010)");
    replica = create(InstanceSpecSchema, { ...replica, generation: 2n, replicaOf: source(SLOT_R, NEW_PRIMARY, n) });
    const pointedAt = Date.now();
    desire([primary, promoted, replica]);

    // Found, stopped and reported: not running, a new seed wanted, the server's words in the message (a pass every
    // second, as the agent's heartbeat makes them).
    const heartbeat = setInterval(() => reconciler.resync(), 1000);
    const reported = await waitFor(
      () => reports.find((r) => r.databaseId === REPLICA && r.reseed && r.observedGeneration === 2n),
      120_000,
      "the replica reported for a new seed",
    )
      .catch(async (e: Error) => {
        const log = await fx.runtime.serverLog(REPLICA);
        const page = log ? await readLog(log.dir, { limit: 40 }) : undefined;
        const said = page?.entries.map((x) => `${x.severity}: ${x.message} ${x.detail}`).join("\n");
        throw new Error(`${e.message}; last observed ${JSON.stringify(latest(REPLICA)?.message)}; its log:\n${said}`);
      })
      .finally(() => clearInterval(heartbeat));
    console.log(
      `reported for a new seed ${((Date.now() - pointedAt) / 1000).toFixed(1)} s after the new primary's address: ${reported.message}`,
    );
    expect(reported.state).toBe(ObservedState.PROGRESSING);
    expect(reported.message).toMatch(/forked off current database system timeline 1 before current recovery point|is not a child/);
    expect((await fx.runtime.observe(REPLICA)).state).toBe("stopped");
    // It stays so on later passes (an agent restart reads the same log).
    reconciler.resync();
    await new Promise((r) => setTimeout(r, 1000));
    expect(latest(REPLICA)).toMatchObject({ state: ObservedState.PROGRESSING, reseed: true });
    expect((await fx.runtime.observe(REPLICA)).state).toBe("stopped");

    // The databases service takes its seed away: its data goes, it waits for the new seed.
    replica = create(InstanceSpecSchema, { ...replica, generation: 3n, replicaOf: { ...replica.replicaOf!, seedBackupId: "" } });
    desire([primary, promoted, replica]);
    await waitFor(
      () => latest(REPLICA)?.observedGeneration === 3n && latest(REPLICA)?.message === "waiting for the seed backup of its primary",
      60_000,
      "data discarded",
    );
    expect((await fx.runtime.observe(REPLICA)).state).toBe("absent");
    expect(latest(REPLICA)!.reseed).toBe(false);

    // A seed of the new primary: it runs again and has the new primary's writes, those after the seed too.
    promoted = create(InstanceSpecSchema, { ...promoted, backupIds: ["bkp-reseed"] });
    desire([primary, promoted, replica]);
    await seeded(NEW_PRIMARY, "bkp-reseed");
    promoted = create(InstanceSpecSchema, { ...promoted, backupIds: [] });
    replica = create(InstanceSpecSchema, { ...replica, generation: 4n, replicaOf: { ...replica.replicaOf!, seedBackupId: "bkp-reseed" } });
    desire([primary, promoted, replica]);
    await running(REPLICA, 4n);
    await agentSql(fx.dataDir, NEW_PRIMARY, "INSERT INTO acked VALUES (2000)");
    await waitFor(
      async () => (await agentSql(fx.dataDir, REPLICA, "SELECT count(*)::int AS n FROM acked WHERE id > 1000"))[0]?.n === 11,
      30_000,
      "the new primary's writes on the replica",
    );
    // The old primary's writes the standby never had are gone from it, as from the new primary.
    expect((await agentSql(fx.dataDir, REPLICA, "SELECT count(*)::int AS n FROM acked WHERE id BETWEEN 101 AND 200"))[0]!.n).toBe(0);
  });
});
