import { existsSync } from "node:fs";
import net from "node:net";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { createLogger, systemClock } from "@dbaas/kit";
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
import type { Reconciler } from "../../src/reconciler.ts";
import { createSampler } from "../../src/samples/sampler.ts";
import { type Fixture, managerFor, shutdown, startFixture, view } from "../backups/support.ts";
import {
  agentSql,
  connect,
  freePort,
  instanceSpec,
  postmasterPid,
  query,
  randomPassword,
  reconcilerFor,
  running as runningIn,
  scramVerifier,
  waitFor,
} from "../support/fixture.ts";

// Read replicas on real instances, driven the way the agent drives them: the
// reconciler converges a primary and a replica spec (the databases service's
// part is played by the test: slot list, seed backup id, the primary's
// observed address), the backup manager takes the seed backup into a file
// store, and clients check over TLS what the replica serves.

/** The SQLSTATE a statement fails with (undefined when it succeeds). */
async function sqlState(run: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await run();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code ?? (e as Error).message;
  }
}

const SECRET = "replication-test-secret";

describe.each(["17", "16"])("read replicas (PostgreSQL %s)", { timeout: 240_000 }, (major) => {
  const tag = `repl${major}`;
  const replicaId = `rep-${tag}`;
  const slot = `dbaas_rep_${tag}`;
  const promotedId = `db-${tag}p`;
  let fx: Fixture;
  let backups: BackupManager;
  let reconciler: Reconciler;
  const reports: InstanceObservation[] = [];
  let primary: InstanceSpec;
  let replica: InstanceSpec;
  let password: string;
  let replicaPort: number;

  const latest = (id: string) => reconciler.observations().find((o) => o.databaseId === id);
  const desire = (specs: InstanceSpec[]) => {
    reconciler.setDesired(specs);
    backups.setDesired(specs);
  };
  const running = (id: string, generation: bigint) => runningIn(reconciler, id, generation);
  const newReconciler = () => reconcilerFor(fx, { report: (o) => reports.push(o), purgeBackups: (id) => backups.purge(id) });
  const slots = async () => (await fx.sql("SELECT slot_name FROM pg_replication_slots ORDER BY 1")).map((r) => String(r.slot_name));

  beforeAll(async () => {
    fx = await startFixture(tag, major, { replicationSecret: SECRET });
    ({ manager: backups } = managerFor(fx));
    await backups.start();
    password = randomPassword();
    reconciler = newReconciler();
    // A bigger tier than its replica's: the replica must hold the primary's max_connections for hot standby.
    primary = create(InstanceSpecSchema, {
      ...fx.spec,
      tier: "small",
      generation: 2n,
      credentialsGeneration: 2n,
      scramVerifier: scramVerifier(password),
    });
    replicaPort = await freePort();
    replica = instanceSpec({
      databaseId: replicaId,
      version: major,
      port: replicaPort,
      scramVerifier: primary.scramVerifier,
      credentialsGeneration: 2n,
      replicaOf: create(ReplicaSourceSchema, {
        primaryDatabaseId: fx.id,
        primaryHost: fx.spec.host,
        primaryCaPem: await fx.runtime.caCertificatePem(),
        slotName: slot,
        primaryVersion: major,
      }),
    });
  });

  afterAll(async () => {
    await reconciler?.drain();
    await shutdown(backups, fx);
  });

  it("waits for its seed, while the primary gets the slot and reports where it streams from", async () => {
    desire([{ ...primary, replicationSlots: [slot] }, replica]);
    const p = await running(fx.id, 2n);
    expect(p.replicationAddress).toBe("127.0.0.1");
    expect(p.replicationPort).toBeGreaterThan(0);
    expect(p.replicationPort).not.toBe(fx.port);
    expect(await slots()).toEqual([slot]);
    const r = await waitFor(() => latest(replicaId), 10_000, "replica observation");
    expect(r.state).toBe(ObservedState.PROGRESSING);
    expect(r.message).toMatch(/address of its primary/);
    replica.replicaOf!.primaryAddress = p.replicationAddress;
    replica.replicaOf!.primaryPort = p.replicationPort;
    desire([{ ...primary, replicationSlots: [slot] }, replica]);
    await waitFor(() => latest(replicaId)?.message.includes("seed backup"), 10_000, "waiting for the seed");
    expect(latest(replicaId)?.state).toBe(ObservedState.PROGRESSING);
    expect(existsSync(path.join(fx.dataDir, "instances", replicaId))).toBe(false);
  });

  it("is seeded from a base backup taken after the slot and streams: reads, no writes", async () => {
    await query(
      fx.port,
      password,
      "CREATE TABLE items (id int PRIMARY KEY, note text); INSERT INTO items SELECT g, 'before' FROM generate_series(1, 100) g",
    );
    primary = create(InstanceSpecSchema, { ...primary, replicationSlots: [slot] });
    desire([{ ...primary, backupIds: ["bkp-seed"] }, replica]);
    const done = await waitFor(
      () => view(backups, fx.id)?.backups.find((b) => b.backupId === "bkp-seed" && b.state !== BackupState.RUNNING),
      90_000,
      "seed backup",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    // Committed after the backup: reaches the replica only by streaming.
    await query(fx.port, password, "INSERT INTO items SELECT g, 'after' FROM generate_series(101, 150) g");
    replica = create(InstanceSpecSchema, { ...replica, replicaOf: { ...replica.replicaOf!, seedBackupId: "bkp-seed" } });
    desire([primary, replica]);
    await running(replicaId, 1n);
    expect(Number((await query(replicaPort, password, "SELECT count(*) AS n FROM items"))[0]!.n)).toBe(150);

    await query(fx.port, password, "INSERT INTO items VALUES (1000, 'live')");
    const started = Date.now();
    await waitFor(
      async () => (await query(replicaPort, password, "SELECT note FROM items WHERE id = 1000")).length === 1,
      5000,
      "row on the replica",
    );
    expect(Date.now() - started).toBeLessThan(5000);

    expect(await sqlState(() => query(replicaPort, password, "INSERT INTO items VALUES (2000, 'nope')"))).toBe("25006");
    // Its own password was never set: the role and its verifier are the primary's, by replication.
    const conf = await readFile(path.join(fx.dataDir, "instances", replicaId, "dbaas.conf"), "utf8");
    expect(conf).toMatch(/primary_slot_name = 'dbaas_rep_/);
    expect(conf).toMatch(/sslmode=verify-full/);
    expect(conf).toMatch(/^# tier: micro$/m);
    // A micro replica of a small primary: hot-standby-critical settings at the largest tier's (xlarge), so it
    // starts, and keeps replaying through any resize of its primary.
    expect(conf).toMatch(/^max_connections = '800'$/m);
    expect(conf).not.toMatch(new RegExp(SECRET));
    // A user of its own (tenant isolation), not its primary's: its data, its server.
    const owner = async (id: string) => (await stat(path.join(fx.dataDir, "instances", id))).uid;
    if (process.getuid?.() === 0) {
      expect(await owner(replicaId)).not.toBe(await owner(fx.id));
      const pid = Number((await readFile(path.join(fx.dataDir, "instances", replicaId, "postmaster.pid"), "utf8")).split("\n")[0]);
      expect(Number(/^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, "utf8"))![1])).toBe(await owner(replicaId));
    }
  });

  it("takes a password changed on the primary by replication and refuses the old one; sessions opened with it end on both", async () => {
    const old = password;
    // Sessions opened with the old password, one on each server: a reset ends them (the databases service bumps
    // the replica's credentials generation with its primary's).
    const onPrimary = await connect(fx.port, old);
    const onReplica = await connect(replicaPort, old);
    const backendPid = async (c: pg.Client) => Number((await c.query("SELECT pg_backend_pid() AS p")).rows[0].p);
    const [primaryPid, replicaPid] = [await backendPid(onPrimary), await backendPid(onReplica)];
    try {
      password = randomPassword();
      const verifier = scramVerifier(password);
      primary = create(InstanceSpecSchema, { ...primary, credentialsGeneration: 3n, scramVerifier: verifier });
      replica = create(InstanceSpecSchema, { ...replica, credentialsGeneration: 3n, scramVerifier: verifier });
      desire([primary, replica]);
      await waitFor(() => latest(fx.id)?.appliedCredentialsGeneration === 3n, 30_000, "password on the primary");
      await waitFor(() => latest(replicaId)?.appliedCredentialsGeneration === 3n, 60_000, "password confirmed on the replica");
      expect(await sqlState(() => query(replicaPort, password, "SELECT 1"))).toBeUndefined();
      expect(await sqlState(() => query(replicaPort, old, "SELECT 1"))).toBe("28P01");
      // Their backends are gone, and the clients can no longer query.
      for (const [id, pid] of [
        [fx.id, primaryPid],
        [replicaId, replicaPid],
      ] as const)
        expect(await agentSql(fx.dataDir, id, `SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`)).toEqual([]);
      await expect(onPrimary.query("SELECT 1")).rejects.toThrow();
      await expect(onReplica.query("SELECT 1")).rejects.toThrow();
    } finally {
      await onPrimary.end().catch(() => {});
      await onReplica.end().catch(() => {});
    }
  });

  it("reports the replica's lag in the primary's samples", async () => {
    const sampler = createSampler({
      instances: fx.runtime,
      list: () => fx.runtime.list(),
      send: async () => {},
      clock: systemClock,
      log: createLogger("replicas-test"),
    });
    const samples = await sampler.collect();
    const p = samples.find((s) => s.databaseId === fx.id);
    expect(p?.replicaLags.map((l) => [l.replicaId, l.state])).toEqual([[replicaId, "streaming"]]);
    expect(p!.replicaLags[0]!.lagBytes).toBeGreaterThanOrEqual(0n);
    const r = samples.find((s) => s.databaseId === replicaId);
    expect(r?.replicaLags).toEqual([]);
    expect(r!.replicationLagBytes).toBeGreaterThanOrEqual(0n);
  });

  it("streams again after its postmaster is killed, and after the primary restarts on the same private port", async () => {
    const pid = await postmasterPid(fx.dataDir, replicaId);
    process.kill(pid, "SIGKILL");
    await waitFor(async () => (await fx.runtime.observe(replicaId)).state === "crashed", 10_000, "crash noticed");
    reconciler.resync();
    await waitFor(
      async () => {
        const o = await fx.runtime.observe(replicaId);
        return o.state === "running" && !o.message;
      },
      60_000,
      "replica restarted",
    );
    await query(fx.port, password, "INSERT INTO items VALUES (1001, 'after kill')");
    await waitFor(
      async () => (await query(replicaPort, password, "SELECT 1 FROM items WHERE id = 1001").catch(() => [])).length === 1,
      30_000,
      "streaming again",
    );

    const before = latest(fx.id)!.replicationPort;
    primary = create(InstanceSpecSchema, { ...primary, generation: 3n });
    desire([primary, replica]);
    const p = await running(fx.id, 3n);
    expect(p.replicationPort).toBe(before);
    await query(fx.port, password, "INSERT INTO items VALUES (1002, 'after primary restart')");
    await waitFor(
      async () => (await query(replicaPort, password, "SELECT 1 FROM items WHERE id = 1002").catch(() => [])).length === 1,
      30_000,
      "streaming after the primary's restart",
    );
  });

  it("restarts with the new conninfo when its primary's private port moved", async () => {
    const before = latest(fx.id)!.replicationPort;
    await fx.runtime.stop(fx.id);
    // Someone else takes the old private port while the primary is down.
    const squatter = net.createServer();
    await new Promise<void>((r) => squatter.listen(before, "127.0.0.1", r));
    try {
      primary = create(InstanceSpecSchema, { ...primary, generation: 4n });
      desire([primary, replica]);
      const p = await running(fx.id, 4n);
      expect(p.replicationPort).not.toBe(before);
      replica = create(InstanceSpecSchema, {
        ...replica,
        generation: 2n,
        replicaOf: { ...replica.replicaOf!, primaryPort: p.replicationPort },
      });
      desire([primary, replica]);
      await running(replicaId, 2n);
      const conf = await readFile(path.join(fx.dataDir, "instances", replicaId, "dbaas.conf"), "utf8");
      expect(conf).toContain(`port=${p.replicationPort} `);
      await query(fx.port, password, "INSERT INTO items VALUES (1003, 'after the move')");
      await waitFor(
        async () => (await query(replicaPort, password, "SELECT 1 FROM items WHERE id = 1003").catch(() => [])).length === 1,
        30_000,
        "streaming from the moved primary",
      );
    } finally {
      squatter.close();
    }
  });

  it("drops dbaas_ slots the spec no longer lists, and those found after an agent restart", async () => {
    primary = create(InstanceSpecSchema, { ...primary, replicationSlots: [slot, "dbaas_rep_gone"] });
    desire([primary, replica]);
    await waitFor(async () => (await slots()).length === 2, 10_000, "second slot");
    primary = create(InstanceSpecSchema, { ...primary, replicationSlots: [slot] });
    desire([primary, replica]);
    await waitFor(async () => (await slots()).join() === slot, 10_000, "stale slot dropped");

    // A slot this agent's reconciler never heard of (an agent killed before it dropped one): the first converge drops it.
    await fx.sql("SELECT pg_create_physical_replication_slot('dbaas_rep_left_behind', true)");
    await fx.sql("SELECT pg_create_physical_replication_slot('someone_elses', true)");
    await reconciler.drain();
    reconciler = newReconciler();
    desire([primary, replica]);
    await waitFor(async () => (await slots()).join() === `${slot},someone_elses`, 20_000, "left-behind slot dropped");
    await fx.sql("SELECT pg_drop_replication_slot('someone_elses')");
  });

  it("is adopted as a writable primary when promoted, and its slot goes from the old primary", async () => {
    if (major === "17") {
      // As if an agent was killed right after promoting it: adoption carries on from there.
      await agentSql(fx.dataDir, replicaId, "SELECT pg_promote(true, 60)");
    } else {
      // A standby whose postmaster died before it was promoted: adopted from its data as it is.
      const pid = await postmasterPid(fx.dataDir, replicaId);
      process.kill(pid, "SIGKILL");
      await waitFor(async () => (await fx.runtime.observe(replicaId)).state === "crashed", 10_000, "standby dead");
    }
    const port = await freePort();
    const promoted = instanceSpec({
      databaseId: promotedId,
      version: major,
      port,
      scramVerifier: primary.scramVerifier,
      adoptInstanceId: replicaId,
    });
    primary = create(InstanceSpecSchema, { ...primary, replicationSlots: [] });
    desire([primary, promoted]);
    await running(promotedId, 1n);
    expect(existsSync(path.join(fx.dataDir, "instances", replicaId))).toBe(false);
    await query(port, password, "INSERT INTO items VALUES (3000, 'on the promoted one')");
    expect(Number((await query(port, password, "SELECT count(*) AS n FROM items"))[0]!.n)).toBe(155);
    await waitFor(async () => (await slots()).length === 0, 10_000, "slot dropped on the old primary");
    // The old primary is on its own: the promoted database's writes are not there.
    expect(await query(fx.port, password, "SELECT 1 FROM items WHERE id = 3000")).toEqual([]);
    const conf = await readFile(path.join(fx.dataDir, "instances", promotedId, "dbaas.conf"), "utf8");
    expect(conf).not.toMatch(/primary_conninfo/);
  });
});
