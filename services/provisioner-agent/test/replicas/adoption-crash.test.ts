import { existsSync } from "node:fs";
import { readFile, rename, rm } from "node:fs/promises";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  BackupState,
  DesiredState,
  type InstanceObservation,
  type InstanceSpec,
  InstanceSpecSchema,
  ObservedState,
  ReplicaSourceSchema,
} from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import { type Fixture, managerFor, shutdown, startFixture, view } from "../backups/support.ts";
import {
  agentSql,
  freePort,
  instanceSpec,
  query,
  randomPassword,
  reconcilerFor,
  running as runningIn,
  scramVerifier,
  waitFor,
} from "../support/fixture.ts";

// An agent killed in the middle of a promotion's adoption, and a replica
// purged while its agent was down. The adoption's steps (promote, stop,
// rename: process-control.ts adoptReplica) are run partly by hand, one
// replica stopped after each, with the reconciler gone meanwhile (the agent
// is down; the instances keep running, as they do when an agent dies); a new
// reconciler (the restarted agent) is then given what the databases service
// sends by then: the promoted databases adopting the replicas, the purged
// replica, and the primary without any of their slots.

const SECRET = "adoption-crash-secret";
const major = "17";

describe("promotion and deletion of replicas across an agent crash", { timeout: 300_000 }, () => {
  const tag = "adoptcrash";
  // Where each adoption stopped when the agent died.
  const cases = {
    promoted: "rep-adpromoted",
    stopped: "rep-adstopped",
    renamed: "rep-adrenamed",
  } as const;
  const purgedId = "rep-adpurged";
  const replicaIds = [...Object.values(cases), purgedId];
  const slotOf = (id: string) => `dbaas_${id.replace(/[^a-z0-9_]/g, "_")}`;
  const promotedIdOf = (rid: string) => rid.replace(/^rep-ad/, "db-ad");
  let fx: Fixture;
  let backups: BackupManager;
  let reconciler: Reconciler;
  let primary: InstanceSpec;
  let password: string;
  const replicaPorts = new Map<string, number>();
  const replicas = new Map<string, InstanceSpec>();

  const newReconciler = (reports: InstanceObservation[]) =>
    reconcilerFor(fx, { report: (o) => reports.push(o), purgeBackups: (id) => backups.purge(id) });
  const desire = (specs: InstanceSpec[]) => {
    reconciler.setDesired(specs);
    backups.setDesired(specs);
  };
  const latest = (id: string) => reconciler.observations().find((o) => o.databaseId === id);
  const running = (id: string, generation: bigint) => runningIn(reconciler, id, generation, 120_000);
  const slots = async () => (await fx.sql("SELECT slot_name FROM pg_replication_slots ORDER BY 1")).map((r) => String(r.slot_name));
  const instanceDir = (id: string) => path.join(fx.dataDir, "instances", id);
  /** The agent's own client to a running instance, over its socket (as the agent promotes). */
  const asAgent = (id: string, sql: string) => agentSql(fx.dataDir, id, sql);

  beforeAll(async () => {
    fx = await startFixture(tag, major, { replicationSecret: SECRET });
    ({ manager: backups } = managerFor(fx));
    await backups.start();
    reconciler = newReconciler([]);
    password = randomPassword();
    primary = create(InstanceSpecSchema, {
      ...fx.spec,
      generation: 2n,
      credentialsGeneration: 2n,
      scramVerifier: scramVerifier(password),
      replicationSlots: replicaIds.map(slotOf),
    });
    for (const id of replicaIds) {
      const port = await freePort();
      replicaPorts.set(id, port);
      replicas.set(
        id,
        instanceSpec({ databaseId: id, version: major, port, scramVerifier: primary.scramVerifier, credentialsGeneration: 2n }),
      );
    }
  });

  afterAll(async () => {
    await reconciler?.drain();
    await shutdown(backups, fx);
  });

  it("seeds four replicas of one primary from one base backup", async () => {
    desire([primary]);
    const p = await running(fx.id, 2n);
    expect(await slots()).toEqual(replicaIds.map(slotOf).sort());
    await query(fx.port, password, "CREATE TABLE items (id int PRIMARY KEY); INSERT INTO items SELECT generate_series(1, 100)");
    desire([{ ...primary, backupIds: ["bkp-seed"] }]);
    const done = await waitFor(
      () => view(backups, fx.id)?.backups.find((b) => b.backupId === "bkp-seed" && b.state !== BackupState.RUNNING),
      90_000,
      "seed backup",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    const caPem = await fx.runtime.caCertificatePem();
    for (const [id, spec] of replicas) {
      spec.replicaOf = create(ReplicaSourceSchema, {
        primaryDatabaseId: fx.id,
        primaryHost: fx.spec.host,
        primaryCaPem: caPem,
        primaryAddress: p.replicationAddress,
        primaryPort: p.replicationPort,
        slotName: slotOf(id),
        primaryVersion: major,
        seedBackupId: "bkp-seed",
      });
    }
    desire([primary, ...replicas.values()]);
    for (const id of replicaIds) await running(id, 1n);
    // Committed after the seed: on the replicas by streaming only, and what each promoted database must hold.
    await query(fx.port, password, "INSERT INTO items SELECT generate_series(101, 150)");
    for (const id of replicaIds) {
      await waitFor(
        async () => Number((await query(replicaPorts.get(id)!, password, "SELECT count(*) AS n FROM items"))[0]!.n) === 150,
        30_000,
        `${id} caught up`,
      );
    }
  });

  it("converges each adoption interrupted after any step, and drops a replica purged while the agent was down", async () => {
    // The agent dies: nothing converges until it is back.
    await reconciler.drain();

    // Promoted, not stopped.
    await asAgent(cases.promoted, "SELECT pg_promote(true, 60)");
    // Promoted and stopped, not renamed.
    await asAgent(cases.stopped, "SELECT pg_promote(true, 60)");
    await fx.runtime.stop(cases.stopped);
    // Promoted, stopped and renamed (its passfile gone, as adoptReplica removes it first), not started; its log not moved yet.
    await asAgent(cases.renamed, "SELECT pg_promote(true, 60)");
    await fx.runtime.stop(cases.renamed);
    await rm(path.join(fx.dataDir, "replication", cases.renamed), { recursive: true, force: true });
    await rename(instanceDir(cases.renamed), instanceDir(promotedIdOf(cases.renamed)));

    // What the databases service sends the restarted agent: the promoted databases, the purged replica, and the
    // primary without the slots of all four.
    const promoted = new Map<string, { spec: InstanceSpec; port: number }>();
    for (const rid of Object.values(cases)) {
      const id = promotedIdOf(rid);
      const port = await freePort();
      promoted.set(rid, {
        port,
        spec: instanceSpec({ databaseId: id, version: major, port, scramVerifier: primary.scramVerifier, adoptInstanceId: rid }),
      });
    }
    const purged = create(InstanceSpecSchema, { ...replicas.get(purgedId)!, desiredState: DesiredState.PURGED, generation: 2n });
    primary = create(InstanceSpecSchema, { ...primary, replicationSlots: [] });
    reconciler = newReconciler([]);
    desire([primary, purged, ...[...promoted.values()].map((p) => p.spec)]);

    await waitFor(() => latest(purgedId)?.state === ObservedState.PURGED, 60_000, "replica purged");
    expect(existsSync(instanceDir(purgedId))).toBe(false);
    expect(existsSync(path.join(fx.dataDir, "replication", purgedId))).toBe(false);

    for (const [rid, { spec, port }] of promoted) {
      await running(spec.databaseId, 1n);
      // Writable, with everything committed on the primary before the crash.
      await query(port, password, "INSERT INTO items VALUES (1000)");
      expect(Number((await query(port, password, "SELECT count(*) AS n FROM items"))[0]!.n), rid).toBe(151);
      expect(existsSync(instanceDir(rid)), rid).toBe(false);
      expect(existsSync(`${instanceDir(rid)}.log`), rid).toBe(false);
      expect(existsSync(path.join(fx.dataDir, "replication", rid)), rid).toBe(false);
      expect(existsSync(path.join(fx.dataDir, "applied", `${rid}.json`)), rid).toBe(false);
      // What the promoted server archived under the replica's id is purged, spool and store.
      expect(existsSync(path.join(fx.dataDir, "wal-spool", rid)), rid).toBe(false);
      expect(existsSync(path.join(fx.storeDir, rid)), rid).toBe(false);
      expect(existsSync(path.join(fx.dataDir, "instances", `${spec.databaseId}.log`)), rid).toBe(true);
      const conf = await readFile(path.join(instanceDir(spec.databaseId), "dbaas.conf"), "utf8");
      expect(conf, rid).not.toMatch(/primary_conninfo/);
    }
    // Every slot goes from the primary: those of the promoted replicas and that of the purged one.
    await waitFor(async () => (await slots()).length === 0, 20_000, "the four slots dropped");
    // And the primary is on its own.
    expect(await query(fx.port, password, "SELECT 1 FROM items WHERE id = 1000")).toEqual([]);
  });
});
