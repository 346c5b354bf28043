import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { BackupState, DesiredState, InstanceSampleSchema, ObservedState } from "@dbaas/proto/agent";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { BackupStatus } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scheduleBackups } from "../src/backup-schedule.ts";
import { relayOutboxOnce } from "../src/outbox-relay.ts";
import { slotName } from "../src/replicas.ts";
import {
  CA_PEM,
  completeBackup,
  createDb,
  createHarness,
  DOMAIN,
  expectCode,
  registerAgent,
  report,
  reportBackups,
  runningDb,
  snapshot,
  specOf,
  statusOf,
  uniqueName,
  violationsOf,
  type Harness,
} from "./harness.ts";

// Read replicas on the databases service's side: the records and their errors, seeding from the primary's
// backups, the specs both agents get, coupling with the primary, promotion, lag and billing's events.
// Scheduled backups are off (the per-agent cap is 0): every backup here is a replica's seed or a manual one.

let h: Harness;
const AGENT = "rep-a";
const OTHER_AGENT = "rep-b";
const ORG = "org-rep";

beforeAll(async () => {
  h = await createHarness({ BACKUP_MAX_RUNNING_PER_AGENT: "0" });
  await registerAgent(h, AGENT, { capacity: 1000 });
  await registerAgent(h, OTHER_AGENT, { regions: ["hel1"], ports: [30000, 30999], capacity: 1000 });
});

afterAll(async () => {
  await h?.close();
});

const newReplica = (databaseId: string, o: { name?: string; tier?: string; region?: string; org?: string } = {}) =>
  h.dbs.createReplica({
    organizationId: o.org ?? ORG,
    databaseId,
    name: o.name ?? uniqueName("rep"),
    tier: o.tier ?? "",
    region: o.region ?? "",
  });
const getReplica = (databaseId: string, replicaId: string, org = ORG) => h.dbs.getReplica({ organizationId: org, databaseId, replicaId });
const replicaStatus = async (databaseId: string, replicaId: string) => (await getReplica(databaseId, replicaId)).replica!.status;
const backupsOf = async (databaseId: string) =>
  (await h.dbs.listBackups({ organizationId: ORG, databaseId, perPage: 100 })).backups.map((b) => ({ id: b.id, status: b.status }));
const failBackup = (databaseId: string, id: string, message: string) =>
  reportBackups(h, AGENT, databaseId, { backups: [{ id, state: BackupState.FAILED, completedAt: new Date(), message }] });

async function primary(): Promise<string> {
  return (await runningDb(h, ORG, AGENT)).database!.id;
}

/** A replica of `primaryId` on AGENT, seeded (its seed backup completed) and reported running. */
async function runningReplica(primaryId: string, o: { name?: string } = {}) {
  const { replica } = await newReplica(primaryId, o);
  const seed = (await backupsOf(primaryId)).find((b) => b.status === BackupStatus.RUNNING)!;
  await completeBackup(h, AGENT, primaryId, seed.id);
  await report(h, AGENT, replica!.id, ObservedState.RUNNING);
  expect(await replicaStatus(primaryId, replica!.id)).toBe("running");
  return replica!;
}

describe("CreateReplica", () => {
  it("makes a provisioning replica with the primary's tier, region, version, database and user; its slot and seed on the primary", async () => {
    const id = await primary();
    const name = uniqueName("rep");
    const { replica } = await newReplica(id, { name });
    expect(replica).toMatchObject({
      name,
      databaseId: id,
      region: "fsn1",
      tier: "micro",
      status: "provisioning",
      database: "defaultdb",
      username: "dbadmin",
      lagBytes: 0n,
      statusReason: "",
    });
    expect(replica!.id).toMatch(/^rep-[a-z0-9]+$/);
    expect(replica!.host).toBe(`${replica!.id}.${DOMAIN}`);
    expect(replica!.connectionString).toBe(
      `postgresql://dbadmin:********@${replica!.id}.${DOMAIN}:${replica!.port}/defaultdb?sslmode=require`,
    );
    expect(replica!.createdAt).toBeDefined();

    // The seed: a base backup of the primary, requested now that the replica (and so its slot) exists.
    const backups = await backupsOf(id);
    expect(backups).toEqual([{ id: expect.any(String), status: BackupStatus.RUNNING }]);
    const primarySpec = (await specOf(h, AGENT, id))!;
    expect(primarySpec.replicationSlots).toEqual([slotName(replica!.id)]);
    expect(primarySpec.backupIds).toEqual([backups[0]!.id]);
    expect(slotName(replica!.id)).toBe(`dbaas_${replica!.id.replace("-", "_")}`);

    const spec = (await specOf(h, AGENT, replica!.id))!;
    expect(spec).toMatchObject({
      version: "17",
      tier: "micro",
      port: replica!.port,
      desiredState: DesiredState.RUNNING,
      adoptInstanceId: "",
    });
    expect(spec.replicationSlots).toEqual([]);
    // Until the seed completes the agent waits: no seed in the spec.
    expect(spec.replicaOf).toMatchObject({
      primaryDatabaseId: id,
      seedBackupId: "",
      primaryHost: `${id}.${DOMAIN}`,
      primaryCaPem: CA_PEM,
      slotName: slotName(replica!.id),
      primaryVersion: "17",
    });
    // The primary's verifier: the record tells the truth, though the replica's roles arrive by replication.
    const verifiers = await h.ctx.pool.query("SELECT id, scram_verifier FROM databases WHERE id = ANY($1)", [[id, replica!.id]]);
    expect(new Set(verifiers.rows.map((r) => r.scram_verifier)).size).toBe(1);
  });

  it("takes another tier and region when given: placed on that region's agent", async () => {
    const id = await primary();
    const { replica } = await newReplica(id, { tier: "small", region: "hel1" });
    expect(replica).toMatchObject({ tier: "small", region: "hel1" });
    expect(replica!.port).toBeGreaterThanOrEqual(30000);
    expect((await specOf(h, OTHER_AGENT, replica!.id))!.replicaOf!.primaryCaPem).toBe(CA_PEM);
  });

  it("needs a running primary: 409 naming its status", async () => {
    const { database } = await createDb(h, ORG);
    const err = await expectCode(newReplica(database!.id), Code.FailedPrecondition);
    expect(err.rawMessage).toBe("cannot create a replica of a database that is provisioning");
    const id = await primary();
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    expect((await expectCode(newReplica(id), Code.FailedPrecondition)).rawMessage).toBe(
      "cannot create a replica of a database that is stopping",
    );
  });

  it("allows 5 live replicas: the sixth is 409; a deleted one frees its place", async () => {
    const id = await primary();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await newReplica(id)).replica!.id);
    const err = await expectCode(newReplica(id), Code.FailedPrecondition);
    expect(err.rawMessage).toBe("a database has at most 5 replicas; delete one first");
    await h.dbs.deleteReplica({ organizationId: ORG, databaseId: id, replicaId: ids[0]! });
    await newReplica(id);
  });

  it("holds the limit under concurrent creates: exactly 5 of 7 at once succeed", async () => {
    const id = await primary();
    const results = await Promise.allSettled(Array.from({ length: 7 }, () => newReplica(id)));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(5);
    expect((await h.dbs.listReplicas({ organizationId: ORG, databaseId: id })).total).toBe(5);
    expect((await specOf(h, AGENT, id))!.replicationSlots).toHaveLength(5);
  });

  it("names: unique among the primary's live replicas (case aside); a database's name or another primary's replica's is fine", async () => {
    const id = await primary();
    const other = await primary();
    const name = uniqueName("rep");
    await newReplica(id, { name });
    const err = await expectCode(newReplica(id, { name: name.toUpperCase() }), Code.AlreadyExists);
    expect(err.rawMessage).toBe(`the database already has a replica named "${name.toUpperCase()}"`);
    await newReplica(other, { name });
    const { database } = await createDb(h, ORG, { name });
    expect(database!.name).toBe(name);
  });

  it("needs a default payment method (402, payment_required), whatever the free allowance", async () => {
    const org = "org-rep-free";
    const { database } = await runningDb(h, org, AGENT);
    h.billing.withoutPaymentMethod.add(org);
    try {
      const err = await expectCode(newReplica(database!.id, { org }), Code.FailedPrecondition);
      expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
      expect((await h.dbs.listReplicas({ organizationId: org, databaseId: database!.id })).total).toBe(0);
    } finally {
      h.billing.withoutPaymentMethod.delete(org);
    }
  });

  it("refuses an unknown tier or region and a bad name, naming each field (INVALID_ARGUMENT)", async () => {
    const id = await primary();
    const err = await expectCode(newReplica(id, { name: "x", tier: "huge", region: "mars" }), Code.InvalidArgument);
    expect(violationsOf(err).map((v) => v.field)).toEqual(["name", "region", "tier"]);
  });

  it("is NOT_FOUND for another organization's database, a deleted one, or a replica id of another database", async () => {
    const id = await primary();
    await expectCode(newReplica(id, { org: "org-other" }), Code.NotFound);
    const { replica } = await newReplica(id);
    await expectCode(getReplica(id, replica!.id, "org-other"), Code.NotFound);
    const other = await primary();
    await expectCode(getReplica(other, replica!.id), Code.NotFound);
    await expectCode(h.dbs.deleteReplica({ organizationId: ORG, databaseId: other, replicaId: replica!.id }), Code.NotFound);
    await expectCode(h.dbs.promoteReplica({ organizationId: ORG, databaseId: other, replicaId: replica!.id }), Code.NotFound);
    await expectCode(h.dbs.listReplicas({ organizationId: "org-other", databaseId: id }), Code.NotFound);
    // A replica is no database: the database calls do not see it.
    await expectCode(h.dbs.getDatabase({ organizationId: ORG, id: replica!.id }), Code.NotFound);
    await expectCode(newReplica(replica!.id), Code.NotFound);
    const listed = await h.dbs.listDatabases({ organizationId: ORG, perPage: 100 });
    expect(listed.databases.map((d) => d.id)).not.toContain(replica!.id);
  });
});

describe("ListReplicas and GetReplica", () => {
  it("lists the live replicas, oldest first, with the standard paging; get shows one", async () => {
    const id = await primary();
    const a = (await newReplica(id)).replica!;
    const b = (await newReplica(id)).replica!;
    const page = await h.dbs.listReplicas({ organizationId: ORG, databaseId: id, perPage: 1 });
    expect(page).toMatchObject({ total: 2, page: 1, perPage: 1 });
    expect(page.replicas.map((r) => r.id)).toEqual([a.id]);
    const all = await h.dbs.listReplicas({ organizationId: ORG, databaseId: id });
    expect(all.replicas.map((r) => r.id)).toEqual([a.id, b.id]);
    expect((await getReplica(id, b.id)).replica).toEqual(b);
    const bad = await expectCode(h.dbs.listReplicas({ organizationId: ORG, databaseId: id, page: -1 }), Code.InvalidArgument);
    expect(violationsOf(bad).map((v) => v.field)).toEqual(["page"]);
  });
});

describe("seeding", () => {
  it("puts the seed in the replica's spec once the backup completed (a new generation), and the primary's endpoint", async () => {
    const id = await primary();
    const { replica } = await newReplica(id);
    const before = (await specOf(h, AGENT, replica!.id))!;

    // The primary's agent reports where it listens for replication: the replica's spec follows, under a new generation.
    const p = (await specOf(h, AGENT, id))!;
    const observe = (port: number) =>
      h.agents.reportInstances({
        agentId: AGENT,
        instances: [
          {
            databaseId: id,
            state: ObservedState.RUNNING,
            observedGeneration: p.generation,
            appliedCredentialsGeneration: p.credentialsGeneration,
            replicationAddress: "127.0.0.1",
            replicationPort: port,
          },
        ],
      });
    await observe(25432);
    const moved = (await specOf(h, AGENT, replica!.id))!;
    expect(moved.replicaOf).toMatchObject({ primaryAddress: "127.0.0.1", primaryPort: 25432, seedBackupId: "" });
    expect(moved.generation).toBe(before.generation + 1n);
    // Reported again unchanged: nothing moves.
    await observe(25432);
    expect((await specOf(h, AGENT, replica!.id))!.generation).toBe(moved.generation);

    const [seed] = await backupsOf(id);
    await completeBackup(h, AGENT, id, seed!.id);
    const seeded = (await specOf(h, AGENT, replica!.id))!;
    expect(seeded.replicaOf!.seedBackupId).toBe(seed!.id);
    expect(seeded.generation).toBe(moved.generation + 1n);

    await report(h, AGENT, replica!.id, ObservedState.RUNNING);
    expect(await replicaStatus(id, replica!.id)).toBe("running");
  });

  it("does not count a backup already running (it may predate the slot): waits for it, then requests its own", async () => {
    const id = await primary();
    const { backup: manual } = await h.dbs.createBackup({ organizationId: ORG, databaseId: id });
    const { replica } = await newReplica(id);
    expect(await backupsOf(id)).toEqual([{ id: manual!.id, status: BackupStatus.RUNNING }]);
    await completeBackup(h, AGENT, id, manual!.id);
    expect((await specOf(h, AGENT, replica!.id))!.replicaOf!.seedBackupId).toBe("");
    const seed = (await backupsOf(id)).find((b) => b.status === BackupStatus.RUNNING)!;
    expect(seed.id).not.toBe(manual!.id);
    await completeBackup(h, AGENT, id, seed.id);
    expect((await specOf(h, AGENT, replica!.id))!.replicaOf!.seedBackupId).toBe(seed.id);
  });

  it("requests a failed seed again, 3 attempts in all, then fails the replica with the reason; it can be deleted", async () => {
    const id = await primary();
    const { replica } = await newReplica(id);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const running = (await backupsOf(id)).filter((b) => b.status === BackupStatus.RUNNING);
      expect(running, `attempt ${attempt}`).toHaveLength(1);
      expect(await replicaStatus(id, replica!.id)).toBe("provisioning");
      await failBackup(id, running[0]!.id, `disk full ${attempt}`);
    }
    expect(await backupsOf(id)).toHaveLength(3);
    expect((await backupsOf(id)).every((b) => b.status === BackupStatus.FAILED)).toBe(true);
    const { replica: failed } = await getReplica(id, replica!.id);
    expect(failed).toMatchObject({
      status: "failed",
      statusReason: "could not seed the replica: the primary's base backup failed 3 times (last: disk full 3)",
    });
    // Given up for good: the schedule asks for no fourth seed.
    await scheduleBackups(h.ctx);
    expect(await backupsOf(id)).toHaveLength(3);
    await h.dbs.deleteReplica({ organizationId: ORG, databaseId: id, replicaId: replica!.id });
    expect((await h.dbs.listReplicas({ organizationId: ORG, databaseId: id })).total).toBe(0);
  });

  it("seeds a replica again when its agent reports it cannot follow its primary: provisioning with why, a new seed, running again", async () => {
    const id = await primary();
    const replica = await runningReplica(id);
    const before = (await specOf(h, AGENT, replica.id))!;
    const why = "new timeline 2 forked off current database system timeline 1 before current recovery point 0/7000AA8";
    const cannotFollow = (generation: bigint) =>
      h.agents.reportInstances({
        agentId: AGENT,
        instances: [
          {
            databaseId: replica.id,
            state: ObservedState.PROGRESSING,
            observedGeneration: generation,
            appliedCredentialsGeneration: before.credentialsGeneration,
            message: `cannot follow its primary: ${why}`,
            reseed: true,
          },
        ],
      });
    // Work under way without the flag changes nothing.
    await report(h, AGENT, replica.id, ObservedState.PROGRESSING, { message: "starting" });
    expect(await replicaStatus(id, replica.id)).toBe("running");

    await cannotFollow(before.generation);
    const { replica: shown } = await getReplica(id, replica.id);
    expect(shown).toMatchObject({ status: "provisioning" });
    expect(shown!.statusReason).toContain(why);
    // Its seed taken away (its agent discards the data), and a new one asked of the primary at once.
    const cleared = (await specOf(h, AGENT, replica.id))!;
    expect(cleared.generation).toBe(before.generation + 1n);
    expect(cleared.replicaOf!.seedBackupId).toBe("");
    const seed = (await backupsOf(id)).find((b) => b.status === BackupStatus.RUNNING)!;
    expect(seed.id).not.toBe(before.replicaOf!.seedBackupId);
    // Said again (the next heartbeat, of the older generation): nothing more.
    await cannotFollow(before.generation);
    expect((await specOf(h, AGENT, replica.id))!.generation).toBe(cleared.generation);
    expect((await backupsOf(id)).filter((b) => b.status === BackupStatus.RUNNING)).toHaveLength(1);

    await completeBackup(h, AGENT, id, seed.id);
    expect((await specOf(h, AGENT, replica.id))!.replicaOf!.seedBackupId).toBe(seed.id);
    await report(h, AGENT, replica.id, ObservedState.RUNNING);
    expect(await getReplica(id, replica.id)).toMatchObject({ replica: { status: "running", statusReason: "" } });
  });

  it("asks for no seed while the primary is stopped; the schedule asks once it runs again", async () => {
    const id = await primary();
    const { replica } = await newReplica(id);
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    // The stopped primary's agent will not take the backup: the schedule abandons it (attempt 1).
    await scheduleBackups(h.ctx);
    await report(h, AGENT, id, ObservedState.STOPPED);
    expect((await backupsOf(id)).map((b) => b.status)).toEqual([BackupStatus.FAILED]);
    await h.dbs.startDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.RUNNING);
    const running = (await backupsOf(id)).filter((b) => b.status === BackupStatus.RUNNING);
    expect(running).toHaveLength(1);
    await completeBackup(h, AGENT, id, running[0]!.id);
    expect((await specOf(h, AGENT, replica!.id))!.replicaOf!.seedBackupId).toBe(running[0]!.id);
  });
});

describe("coupling with the primary", () => {
  it("stop stops the replicas, start starts them; a restart or resize leaves them alone", async () => {
    const id = await primary();
    const r = await runningReplica(id);
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    expect(await replicaStatus(id, r.id)).toBe("stopping");
    expect((await specOf(h, AGENT, r.id))!.desiredState).toBe(DesiredState.STOPPED);
    await report(h, AGENT, id, ObservedState.STOPPED);
    await report(h, AGENT, r.id, ObservedState.STOPPED);
    expect(await replicaStatus(id, r.id)).toBe("stopped");

    await h.dbs.startDatabase({ organizationId: ORG, id });
    expect(await replicaStatus(id, r.id)).toBe("starting");
    expect((await specOf(h, AGENT, r.id))!.desiredState).toBe(DesiredState.RUNNING);
    await report(h, AGENT, id, ObservedState.RUNNING);
    await report(h, AGENT, r.id, ObservedState.RUNNING);
    expect(await replicaStatus(id, r.id)).toBe("running");

    const generation = (await specOf(h, AGENT, r.id))!.generation;
    await h.dbs.restartDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.RUNNING);
    await h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "small" });
    expect(await replicaStatus(id, r.id)).toBe("running");
    expect((await specOf(h, AGENT, r.id))!).toMatchObject({ generation, tier: "micro" });
  });

  it("delete deletes the replicas and purges them at once", async () => {
    const id = await primary();
    const r = await runningReplica(id);
    await h.dbs.deleteDatabase({ organizationId: ORG, id });
    expect((await specOf(h, AGENT, r.id))!.desiredState).toBe(DesiredState.PURGED);
    await expectCode(getReplica(id, r.id), Code.NotFound);
    const { rows } = await h.ctx.pool.query("SELECT status, deleted_at FROM databases WHERE id = $1", [r.id]);
    expect(rows[0]).toMatchObject({ status: "deleted", deleted_at: expect.any(Date) });
    await report(h, AGENT, r.id, ObservedState.PURGED);
    expect(await specOf(h, AGENT, r.id)).toBeUndefined();
  });
});

describe("DeleteReplica", () => {
  it("purges the replica at once, gone from the API; its slot leaves the primary's spec", async () => {
    const id = await primary();
    const keep = await runningReplica(id);
    const r = await runningReplica(id);
    expect((await specOf(h, AGENT, id))!.replicationSlots).toEqual([keep.id, r.id].sort().map(slotName));
    await h.dbs.deleteReplica({ organizationId: ORG, databaseId: id, replicaId: r.id });
    await expectCode(getReplica(id, r.id), Code.NotFound);
    expect((await h.dbs.listReplicas({ organizationId: ORG, databaseId: id })).replicas.map((x) => x.id)).toEqual([keep.id]);
    expect((await specOf(h, AGENT, r.id))!.desiredState).toBe(DesiredState.PURGED);
    expect((await specOf(h, AGENT, id))!.replicationSlots).toEqual([slotName(keep.id)]);
    await expectCode(h.dbs.deleteReplica({ organizationId: ORG, databaseId: id, replicaId: r.id }), Code.NotFound);
  });
});

describe("PromoteReplica", () => {
  it("makes a starting database that adopts the replica's instance; the replica and its slot are gone", async () => {
    const id = await primary();
    const r = await runningReplica(id, { name: uniqueName("promo") });
    const { database } = await h.dbs.promoteReplica({ organizationId: ORG, databaseId: id, replicaId: r.id });
    expect(database).toMatchObject({ name: r.name, tier: r.tier, region: r.region, version: "17", port: r.port, status: "starting" });
    expect(database!.id).toMatch(/^db-[a-z0-9]+$/);
    expect(database!.connectionString).toContain(":********@");

    const specs = (await snapshot(h, AGENT)).instances;
    expect(specs.find((s) => s.databaseId === r.id)).toBeUndefined();
    const spec = specs.find((s) => s.databaseId === database!.id)!;
    expect(spec).toMatchObject({ adoptInstanceId: r.id, port: r.port, desiredState: DesiredState.RUNNING, replicationSlots: [] });
    expect(spec.replicaOf).toBeUndefined();
    expect(specs.find((s) => s.databaseId === id)!.replicationSlots).toEqual([]);
    await expectCode(getReplica(id, r.id), Code.NotFound);
    expect((await h.dbs.listReplicas({ organizationId: ORG, databaseId: id })).total).toBe(0);

    // The new database's credentials are the primary's.
    const { rows } = await h.ctx.pool.query("SELECT id, scram_verifier FROM databases WHERE id = ANY($1)", [[id, database!.id]]);
    expect(new Set(rows.map((x) => x.scram_verifier)).size).toBe(1);

    await report(h, AGENT, database!.id, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, database!.id)).toBe("running");
    const ops = await h.dbs.listOperations({ organizationId: ORG, databaseId: database!.id });
    expect(ops.operations.map((o) => [o.type, o.status])).toEqual([["promote", "succeeded"]]);
  });

  it("needs a running replica (409) and a name no live database of the organization has", async () => {
    const id = await primary();
    const { replica } = await newReplica(id);
    const err = await expectCode(
      h.dbs.promoteReplica({ organizationId: ORG, databaseId: id, replicaId: replica!.id }),
      Code.FailedPrecondition,
    );
    expect(err.rawMessage).toBe("cannot promote a replica that is provisioning");

    const name = uniqueName("taken");
    const r = await runningReplica(id, { name });
    await createDb(h, ORG, { name });
    const taken = await expectCode(h.dbs.promoteReplica({ organizationId: ORG, databaseId: id, replicaId: r.id }), Code.AlreadyExists);
    expect(taken.rawMessage).toBe(`a database named "${name}" already exists; rename it first`);
    expect(await replicaStatus(id, r.id)).toBe("running");
  });
});

describe("lag", () => {
  it("takes each replica's lag from the primary's samples: lag_bytes and the primary's replication_lag_bytes per replica", async () => {
    const id = await primary();
    const a = await runningReplica(id);
    const b = await runningReplica(id);
    const t = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 5 * 60_000);
    const sample = (i: number, at: Date, lags: [string, bigint][]) =>
      create(InstanceSampleSchema, {
        databaseId: id,
        sampleId: `lag-${i}`,
        sampledAt: timestampFromDate(at),
        countersEpoch: "e",
        replicaLags: lags.map(([replicaId, lagBytes]) => ({ replicaId, lagBytes, state: "streaming" })),
      });
    await h.agents.reportSamples({
      agentId: AGENT,
      samples: [
        sample(1, t, [
          [a.id, 100n],
          [b.id, 10n],
        ]),
        sample(2, new Date(t.getTime() + 30_000), [
          [a.id, 300n],
          [b.id, 20n],
        ]),
        // A replica of another database is not this primary's.
        sample(3, new Date(t.getTime() + 31_000), [["rep-unknown", 5n]]),
      ],
    });
    // A late sample does not move lag_bytes back.
    await h.agents.reportSamples({ agentId: AGENT, samples: [sample(0, new Date(t.getTime() - 30_000), [[a.id, 999n]])] });
    expect((await getReplica(id, a.id)).replica!.lagBytes).toBe(300n);
    expect((await getReplica(id, b.id)).replica!.lagBytes).toBe(20n);

    const metrics = await h.dbs.getMetrics({
      organizationId: ORG,
      databaseId: id,
      names: ["replication_lag_bytes"],
      start: timestampFromDate(new Date(t.getTime() - 60_000)),
      end: timestampFromDate(new Date(t.getTime() + 60_000)),
      stepSeconds: 60,
    });
    const [lag] = metrics.metrics;
    expect(lag!.unit).toBe("bytes");
    const series = Object.fromEntries(lag!.series.map((s) => [s.labels.replica, s.values]));
    expect(series).toEqual({ [a.id]: [999, 200], [b.id]: [15] });
  });

  it("does not bill a replica's own samples as storage or transfer", async () => {
    const id = await primary();
    const r = await runningReplica(id);
    const at = timestampFromDate(new Date());
    await h.agents.reportSamples({
      agentId: AGENT,
      samples: [
        create(InstanceSampleSchema, { databaseId: id, sampleId: "u-1", sampledAt: at, countersEpoch: "e", storageBytes: 5n }),
        create(InstanceSampleSchema, { databaseId: r.id, sampleId: "u-1", sampledAt: at, countersEpoch: "e", storageBytes: 5n }),
      ],
    });
    const { rows } = await h.ctx.pool.query(
      "SELECT payload->>'database_id' AS id FROM outbox WHERE topic = 'database.usage' AND payload->>'database_id' = ANY($1)",
      [[id, r.id]],
    );
    expect(rows.map((x) => x.id)).toEqual([id]);
    // Its sample is kept all the same.
    const kept = await h.ctx.pool.query("SELECT 1 FROM samples WHERE database_id = $1", [r.id]);
    expect(kept.rowCount).toBe(1);
  });
});

describe("billing's status events", () => {
  it("carry kind replica for a replica, database otherwise, through the outbox relay", async () => {
    const id = await primary();
    const r = await runningReplica(id);
    await h.dbs.deleteReplica({ organizationId: ORG, databaseId: id, replicaId: r.id });
    while ((await relayOutboxOnce(h.ctx)) > 0) {}
    const events = h.billing.delivered().filter((e) => e.databaseId === r.id || e.databaseId === id);
    expect(events.filter((e) => e.databaseId === r.id).map((e) => [e.status, e.kind])).toEqual([
      ["provisioning", "replica"],
      ["running", "replica"],
      ["deleted", "replica"],
    ]);
    expect(new Set(events.filter((e) => e.databaseId === id).map((e) => e.kind))).toEqual(new Set(["database"]));
  });
});
