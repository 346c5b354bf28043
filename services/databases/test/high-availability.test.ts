import { Code } from "@connectrpc/connect";
import type { Clock } from "@dbaas/kit";
import { DesiredState, ObservedState } from "@dbaas/proto/agent";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { BackupStatus } from "@dbaas/proto/databases";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AppContext } from "../src/context.ts";
import { createSupervisorState, replaceLostStandbys, superviseHighAvailability, type SupervisorState } from "../src/high-availability.ts";
import { relayOutboxOnce } from "../src/outbox-relay.ts";
import { slotName } from "../src/replicas.ts";
import {
  completeBackup,
  createHarness,
  expectCode,
  registerAgent,
  report,
  resetTables,
  snapshot,
  specOf,
  uniqueName,
  violationsOf,
  type Harness,
} from "./harness.ts";

// High availability on the databases service's side (docs/product.md, High availability): the record and its
// errors, standbys placed apart at the primary's port, their specs, leases, the supervisor's failover with a
// moved clock (promotion, discard of the old primary, a replacement standby), a planned switchover, no storm, a
// standby's lost host (the standby retired and replaced after HA_STANDBY_REPLACE_AFTER_SECONDS).

let h: Harness;
const ORG = "org-ha";
const [A, B, C, D] = ["ha-a", "ha-b", "ha-c", "ha-d"];

beforeAll(async () => {
  h = await createHarness({ BACKUP_MAX_RUNNING_PER_AGENT: "0" });
});

afterAll(async () => {
  await h?.close();
});

beforeEach(async () => {
  await resetTables(h);
  // A has the most room: every database's primary goes there first.
  await registerAgent(h, A, { capacity: 100 });
  await registerAgent(h, B, { capacity: 50 });
});

/** A clock `offsetS` seconds from the real one, and the context that reads it. */
const later = (offsetS: number): Clock => ({ now: () => new Date(Date.now() + offsetS * 1000) });
const at = (clock: Clock): AppContext => ({ ...h.ctx, clock });

const ha = (id: string) => h.dbs.getHighAvailability({ organizationId: ORG, databaseId: id }).then((r) => r.highAvailability!);
const setHa = (id: string, standbys: number, synchronous = false) =>
  h.dbs.setHighAvailability({ organizationId: ORG, databaseId: id, standbys, synchronous }).then((r) => r.highAvailability!);
const row = async (id: string) => (await h.ctx.pool.query("SELECT * FROM databases WHERE id = $1", [id])).rows[0];
const standbyRows = async (primaryId: string) =>
  (
    await h.ctx.pool.query("SELECT * FROM databases WHERE primary_id = $1 AND standby AND deleted_at IS NULL ORDER BY created_at", [
      primaryId,
    ])
  ).rows;

async function runningPrimary(o: { name?: string } = {}) {
  const { database } = await h.dbs.createDatabase({
    organizationId: ORG,
    name: o.name ?? uniqueName("ha"),
    region: "fsn1",
    tier: "micro",
    version: "",
    standbys: 0,
    synchronous: false,
  });
  await report(h, A, database!.id, ObservedState.RUNNING);
  return database!;
}

/** Plays an agent reporting an instance's state with its WAL position (and fencing), as of `clock`. */
async function reportWal(
  agent: string,
  id: string,
  state: ObservedState,
  wal: bigint,
  o: { fenced?: boolean; clock?: Clock; replicationPort?: number } = {},
) {
  const spec = (await specOf(h, agent, id))!;
  const agents = o.clock ? h.agentsWith({ clock: o.clock }) : h.agents;
  await agents.reportInstances({
    agentId: agent,
    instances: [
      {
        databaseId: id,
        state,
        observedGeneration: spec.generation,
        appliedCredentialsGeneration: spec.credentialsGeneration,
        message: "",
        walPosition: wal,
        fenced: o.fenced ?? false,
        replicationAddress: state === ObservedState.RUNNING ? "127.0.0.1" : "",
        replicationPort: state === ObservedState.RUNNING ? (o.replicationPort ?? 40000) : 0,
      },
    ],
  });
}

/** The primary's seed backup completed and each standby reported streaming: a database with running standbys. */
async function seedAndRun(primaryId: string) {
  const seed = (await h.dbs.listBackups({ organizationId: ORG, databaseId: primaryId })).backups.find(
    (b) => b.status === BackupStatus.RUNNING,
  )!;
  await completeBackup(h, A, primaryId, seed.id);
  for (const s of await standbyRows(primaryId)) await reportWal(s.agent_id, s.id, ObservedState.RUNNING, 1000n);
}

const renew = (agent: string, clock?: Clock) => (clock ? h.agentsWith({ clock }) : h.agents).renewLeases({ agentId: agent });

describe("the high availability record", () => {
  it("starts with no standbys: the primary alone, no failover", async () => {
    const db = await runningPrimary();
    const rec = await ha(db.id);
    expect(rec).toMatchObject({ standbys: 0, synchronous: false });
    expect(rec.lastFailover).toBeUndefined();
    expect(rec.members.map((m) => [m.role, m.status, m.region, m.lagBytes])).toEqual([["primary", "running", "fsn1", 0n]]);
    expect(rec.members[0]!.id).toMatch(/^node-[a-z0-9]+$/);
  });

  it("PUT 1 standby: placed on another host at the primary's port, seeded from a backup; the specs say standby and lease", async () => {
    const db = await runningPrimary();
    const rec = await setHa(db.id, 1, true);
    expect(rec).toMatchObject({ standbys: 1, synchronous: true });
    expect(rec.members.map((m) => [m.role, m.status])).toEqual([
      ["primary", "running"],
      ["standby", "provisioning"],
    ]);
    const [s] = await standbyRows(db.id);
    expect(s).toMatchObject({ agent_id: B, port: db.port, tier: "micro", standby: true, primary_id: db.id });
    expect(s.id).toBe(rec.members[1]!.id);
    // Not a replica: the replicas' list never shows it.
    expect((await h.dbs.listReplicas({ organizationId: ORG, databaseId: db.id })).total).toBe(0);
    const standbySpec = (await specOf(h, B, s.id))!;
    expect(standbySpec).toMatchObject({ standby: true, port: db.port, desiredState: DesiredState.RUNNING, leaseRequired: false });
    expect(standbySpec.replicaOf).toMatchObject({ primaryDatabaseId: db.id, slotName: slotName(s.id), seedBackupId: "" });
    const primarySpec = (await specOf(h, A, db.id))!;
    expect(primarySpec).toMatchObject({ leaseRequired: true, standby: false, fenced: false, replicationSlots: [slotName(s.id)] });
    // Not streaming yet: commits do not wait for it.
    expect(primarySpec.synchronousStandbyNames).toBe("");
    expect(primarySpec.backupIds).toHaveLength(1);

    await seedAndRun(db.id);
    expect((await ha(db.id)).members.map((m) => m.status)).toEqual(["running", "running"]);
    // The standby's lag: the primary's WAL position minus its own, as their agents last reported them.
    await reportWal(A, db.id, ObservedState.RUNNING, 5096n);
    expect((await ha(db.id)).members.map((m) => m.lagBytes)).toEqual([0n, 4096n]);
    expect((await specOf(h, B, s.id))!.replicaOf!.seedBackupId).not.toBe("");
    expect((await specOf(h, A, db.id))!.synchronousStandbyNames).toBe(`ANY 1 ("${s.id}")`);
    // A standby whose agent has been silent for a lease is no synchronous standby (the primary would wait for it forever).
    const abort = new AbortController();
    let later11: string | undefined;
    try {
      for await (const msg of h.agentsWith({ clock: later(11) }).watchAssignments({ agentId: A }, { signal: abort.signal })) {
        later11 = msg.instances.find((i) => i.databaseId === db.id)!.synchronousStandbyNames;
        break;
      }
    } finally {
      abort.abort();
    }
    expect(later11).toBe("");
    await setHa(db.id, 1, false);
    expect((await specOf(h, A, db.id))!.synchronousStandbyNames).toBe("");
  });

  it("409 naming the reason when the region lacks hosts for the standbys; nothing changes", async () => {
    const db = await runningPrimary();
    const err = await expectCode(setHa(db.id, 2), Code.FailedPrecondition);
    expect(err.rawMessage).toBe(
      `region fsn1 has 1 host besides the primary's that can take a standby now (live, with PostgreSQL 17, capacity left and port ${db.port} free); ` +
        "2 standbys need 2 hosts, each apart from the primary and from each other",
    );
    expect((await ha(db.id)).standbys).toBe(0);
    expect(await standbyRows(db.id)).toHaveLength(0);
    // A host whose range lacks the port does not count either.
    await registerAgent(h, C, { ports: [30000, 30999] });
    expect((await expectCode(setHa(db.id, 2), Code.FailedPrecondition)).rawMessage).toMatch(/^region fsn1 has 1 host besides/);
    await registerAgent(h, C);
    expect((await setHa(db.id, 2)).members.map((m) => m.role)).toEqual(["primary", "standby", "standby"]);
    expect(new Set((await standbyRows(db.id)).map((s) => s.agent_id))).toEqual(new Set([B, C]));
  });

  it("422 for synchronous without a standby or more than 2; 409 adding standbys to a database that is not running", async () => {
    const db = await runningPrimary();
    expect(violationsOf(await expectCode(setHa(db.id, 0, true), Code.InvalidArgument))).toEqual([
      { field: "synchronous", message: "needs at least 1 standby" },
    ]);
    expect(violationsOf(await expectCode(setHa(db.id, 3), Code.InvalidArgument))).toEqual([
      { field: "standbys", message: "must be 0, 1 or 2" },
    ]);
    await h.dbs.stopDatabase({ organizationId: ORG, id: db.id });
    expect((await expectCode(setHa(db.id, 1), Code.FailedPrecondition)).rawMessage).toBe(
      "cannot add standbys to a database that is stopping",
    );
  });

  it("needs a payment method in good standing (402) to add standbys; removing them purges them and drops the lease", async () => {
    const db = await runningPrimary();
    h.billing.withoutPaymentMethod.add(ORG);
    try {
      const err = await expectCode(setHa(db.id, 1), Code.FailedPrecondition);
      expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
    } finally {
      h.billing.withoutPaymentMethod.delete(ORG);
    }
    await setHa(db.id, 1);
    expect((await renew(A)).databaseIds).toEqual([db.id]);
    const [s] = await standbyRows(db.id);
    const rec = await setHa(db.id, 0);
    expect(rec.members).toHaveLength(1);
    expect((await row(s.id)).desired_state).toBe("purged");
    expect((await specOf(h, B, s.id))!.desiredState).toBe(DesiredState.PURGED);
    expect((await specOf(h, A, db.id))!).toMatchObject({ leaseRequired: false, replicationSlots: [] });
    expect((await renew(A)).databaseIds).toEqual([]);
  });

  it("a create with standbys places the primary and them at one port free on each host; 409 when the region lacks hosts", async () => {
    const name = uniqueName("ha");
    const err = await expectCode(
      h.dbs.createDatabase({ organizationId: ORG, name, region: "fsn1", tier: "micro", version: "", standbys: 2, synchronous: true }),
      Code.FailedPrecondition,
    );
    expect(err.rawMessage).toMatch(/^region fsn1 has 2 hosts that can take a server now .* no port free on 3 hosts at once/);
    // Port 20000 taken on A only: the lowest port free on both is 20001... after a plain database on each.
    await runningPrimary();
    const { database } = await h.dbs.createDatabase({
      organizationId: ORG,
      name,
      region: "fsn1",
      tier: "micro",
      version: "",
      standbys: 1,
      synchronous: true,
    });
    const [s] = await standbyRows(database!.id);
    expect(database!.port).toBe(20001);
    expect(s).toMatchObject({ port: 20001 });
    expect(new Set([s.agent_id, (await row(database!.id)).agent_id])).toEqual(new Set([A, B]));
    expect(await ha(database!.id)).toMatchObject({ standbys: 1, synchronous: true });
  });

  it("follows the primary: stop and start reach the standbys, a resize too, a delete purges them", async () => {
    const db = await runningPrimary();
    await setHa(db.id, 1);
    await seedAndRun(db.id);
    const [s] = await standbyRows(db.id);
    await h.dbs.resizeDatabase({ organizationId: ORG, id: db.id, tier: "small" });
    expect((await specOf(h, B, s.id))!.tier).toBe("small");
    await report(h, A, db.id, ObservedState.RUNNING);
    await h.dbs.stopDatabase({ organizationId: ORG, id: db.id });
    expect((await specOf(h, B, s.id))!.desiredState).toBe(DesiredState.STOPPED);
    await h.dbs.deleteDatabase({ organizationId: ORG, id: db.id });
    expect((await specOf(h, B, s.id))!.desiredState).toBe(DesiredState.PURGED);
  });

  it("the CA certificate of a database with standbys is the bundle of its region's hosts (a failover's server verifies with it)", async () => {
    const pem = (n: string) => `-----BEGIN CERTIFICATE-----\nMII${n}\n-----END CERTIFICATE-----\n`;
    for (const [agent, n] of [
      [A, "A"],
      [B, "B"],
    ] as const) {
      await h.agents.registerAgent({
        agentId: agent,
        regions: ["fsn1"],
        capacity: agent === A ? 100 : 50,
        portRangeStart: 20000,
        portRangeEnd: 20999,
        versions: ["17"],
        caCertificatePem: pem(n),
        publicAddresses: ["127.0.0.1"],
      });
    }
    const db = await runningPrimary();
    expect((await h.dbs.getCaCertificate({ organizationId: ORG, id: db.id })).pem).toBe(pem("A"));
    await setHa(db.id, 1);
    expect((await h.dbs.getCaCertificate({ organizationId: ORG, id: db.id })).pem).toBe(pem("A") + pem("B"));
  });

  it("standbys are billed as compute: their status events are of kind database", async () => {
    const db = await runningPrimary();
    await setHa(db.id, 1);
    await seedAndRun(db.id);
    const [s] = await standbyRows(db.id);
    while ((await relayOutboxOnce(h.ctx)) > 0) {}
    expect(
      h.billing
        .delivered()
        .filter((e) => e.databaseId === s.id)
        .map((e) => [e.status, e.kind]),
    ).toEqual([
      ["provisioning", "database"],
      ["running", "database"],
    ]);
  });
});

describe("leases", () => {
  it("the primary's agent renews its lease; another agent gets nothing; a failed primary's lease is not renewed", async () => {
    const db = await runningPrimary();
    await setHa(db.id, 1);
    const before = Date.now();
    const res = await renew(A);
    expect(res).toMatchObject({ databaseIds: [db.id], leaseMillis: 10_000 });
    expect((await renew(B)).databaseIds).toEqual([]);
    const lease = (await h.ctx.pool.query("SELECT * FROM ha_leases WHERE database_id = $1", [db.id])).rows[0];
    expect(lease.agent_id).toBe(A);
    expect(lease.expires_at.getTime()).toBeGreaterThanOrEqual(before + 10_000);
    await report(h, A, db.id, ObservedState.FAILED, { message: "the server would not start" });
    expect((await renew(A)).databaseIds).toEqual([]);
  });
});

describe("the supervisor", () => {
  /** A database with a running standby on B whose primary's agent A last renewed at the real now. */
  async function leasedHaDatabase() {
    const db = await runningPrimary();
    await setHa(db.id, 1, true);
    await seedAndRun(db.id);
    await renew(A);
    return { db, standby: (await standbyRows(db.id))[0] };
  }
  /** A supervisor that has heard renewals for long (no outage). */
  const steady = (): SupervisorState => ({
    ...createSupervisorState(),
    healthySince: new Date(Date.now() - 3600_000),
    lastPassAt: Date.now() + 12_900,
  });

  it("fails over once the lease and the margin passed: standby promoted on its host, name and lease moved, old primary discarded, a replacement placed", async () => {
    await registerAgent(h, C, { capacity: 10 });
    const { db, standby } = await leasedHaDatabase();
    const nodeBefore = (await ha(db.id)).members[0]!.id;
    // A read replica of it, streaming from the primary on A (which reported where it listens for replication).
    await reportWal(A, db.id, ObservedState.RUNNING, 1000n);
    const { replica } = await h.dbs.createReplica({
      organizationId: ORG,
      databaseId: db.id,
      name: uniqueName("rep"),
      tier: "",
      region: "",
    });
    const replicaRow = await row(replica!.id);
    const replicaGeneration = BigInt(replicaRow.generation);
    expect((await specOf(h, replicaRow.agent_id, replica!.id))!.replicaOf).toMatchObject({ primaryPort: 40000 });
    // The standby holds a slot for the replica, at the position the replica's agent last reported (0: none yet), so a
    // promotion keeps the WAL the replica needs; the primary and the replica hold none of these.
    const held = async () => (await specOf(h, B, standby.id))!.standbySlots.map((x) => [x.name, x.position]);
    expect(await held()).toEqual([[slotName(replica!.id), 0n]]);
    await reportWal(replicaRow.agent_id, replica!.id, ObservedState.RUNNING, 3000n);
    expect(await held()).toEqual([[slotName(replica!.id), 3000n]]);
    expect((await specOf(h, A, db.id))!.standbySlots).toEqual([]);
    expect((await specOf(h, replicaRow.agent_id, replica!.id))!.standbySlots).toEqual([]);
    // Before the lease ends: nothing.
    expect(await superviseHighAvailability(at(later(9)), { ...steady(), lastPassAt: Date.now() + 8_900 })).toBe(0);
    // The lease ended at +10; B reports its standby's final WAL at +11; the margin passes at +12.
    await reportWal(B, standby.id, ObservedState.RUNNING, 5000n, { clock: later(11) });
    await registerAgent(h, C, { capacity: 10 });
    await h.agentsWith({ clock: later(12) }).renewLeases({ agentId: C });
    expect(await superviseHighAvailability(at(later(13)), steady())).toBe(1);

    const moved = await row(db.id);
    expect(moved).toMatchObject({ agent_id: B, port: db.port, adopt_instance_id: standby.id, node_id: standby.id, status: "starting" });
    expect(moved.last_failover_reason).toMatch(
      /^ha-a stopped renewing the primary's lease .* promoted the standby with the most WAL \(5000 bytes, synchronous mode\)$/,
    );
    expect((await row(standby.id)).status).toBe("promoted");
    // B runs the database now, adopting its standby's data; A is to remove its old instance.
    const onB = (await snapshot(h, B)).instances.find((i) => i.databaseId === db.id)!;
    expect(onB).toMatchObject({ adoptInstanceId: standby.id, leaseRequired: true, standby: false, port: db.port });
    expect((await snapshot(h, B)).instances.map((i) => i.databaseId)).not.toContain(standby.id);
    const onA = await snapshot(h, A);
    expect(onA.instances.map((i) => i.databaseId)).not.toContain(db.id);
    expect(onA.discardInstanceIds).toEqual([db.id]);
    // The lease is B's; A cannot renew it back.
    expect((await renew(A, later(13))).databaseIds).toEqual([]);
    expect((await renew(B, later(13))).databaseIds).toEqual([db.id]);

    const ops = (await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations;
    const op = ops.find((o) => o.type === "failover")!;
    expect(op).toMatchObject({ status: "running", fromMember: nodeBefore, toMember: standby.id });
    expect(op.reason).toBe(moved.last_failover_reason);
    const rec = await ha(db.id);
    expect(rec.lastFailover).toMatchObject({ reason: moved.last_failover_reason, fromMember: nodeBefore, toMember: standby.id });
    // The replacement standby: on C (A is silent by now? no — apart from the new primary's host B; A holds the old port).
    const replacement = (await standbyRows(db.id)).filter((s) => s.id !== standby.id);
    expect(replacement.map((s) => [s.agent_id, s.port, s.status])).toEqual([[C, db.port, "provisioning"]]);
    expect(rec.members.map((m) => [m.id, m.role])).toEqual([
      [standby.id, "primary"],
      [replacement[0].id, "standby"],
    ]);

    // Until the new server reports where it streams from, the replica waits (its spec has no address).
    expect((await specOf(h, replicaRow.agent_id, replica!.id))!.replicaOf).toMatchObject({ primaryAddress: "", primaryPort: 0 });
    // The new server runs: the failover succeeded; its seed follows from the new primary.
    await reportWal(B, db.id, ObservedState.RUNNING, 6000n, { clock: later(15), replicationPort: 41000 });
    expect((await row(db.id)).status).toBe("running");
    // The read replica follows it: a new generation (its agent restarts it) streaming from B's server, B's slot kept.
    const replicaSpec = (await specOf(h, replicaRow.agent_id, replica!.id))!;
    expect(replicaSpec.generation).toBeGreaterThan(replicaGeneration);
    expect(replicaSpec.replicaOf).toMatchObject({ primaryDatabaseId: db.id, primaryAddress: "127.0.0.1", primaryPort: 41000 });
    expect((await specOf(h, B, db.id))!.replicationSlots).toContain(slotName(replica!.id));
    expect((await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations.find((o) => o.id === op.id)!.status).toBe(
      "succeeded",
    );
    // A comes back and removes the old instance: the discard is confirmed and recorded in the operation.
    await h.agents.reportInstances({
      agentId: A,
      instances: [
        { databaseId: db.id, state: ObservedState.PURGED, observedGeneration: 0n, appliedCredentialsGeneration: 0n, message: "" },
      ],
    });
    expect((await snapshot(h, A)).discardInstanceIds).toEqual([]);
    const after = (await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations.find((o) => o.id === op.id)!;
    expect(after.reason).toMatch(/; the old primary's data on ha-a .* was discarded at /);
  });

  it("never fails over while the lease holds, nor without a standby that reported its WAL after the lease ended", async () => {
    const { db, standby } = await leasedHaDatabase();
    expect(await superviseHighAvailability(at(later(11.5)), { ...steady(), lastPassAt: Date.now() + 11_000 })).toBe(0);
    // +13: the lease is over, but the standby's last WAL report is from before it ended.
    expect(await superviseHighAvailability(at(later(13)), steady())).toBe(0);
    expect((await row(db.id)).agent_id).toBe(A);
    expect((await row(standby.id)).status).toBe("running");
  });

  it("no failover storm: a control plane that just came back waits a whole lease and margin for renewals", async () => {
    const { db, standby } = await leasedHaDatabase();
    await reportWal(B, standby.id, ObservedState.RUNNING, 5000n, { clock: later(60) });
    // Down from the real now to +60: a fresh supervisor (or one whose last pass is long ago) starts hearing now.
    const state = createSupervisorState();
    expect(await superviseHighAvailability(at(later(61)), state)).toBe(0);
    expect(await superviseHighAvailability(at(later(61)), { ...state, lastPassAt: Date.now() + 40_000 })).toBe(0);
    // A renews within seconds: no failover then either.
    await renew(A, later(62));
    expect(await superviseHighAvailability(at(later(74)), { ...state, lastPassAt: Date.now() + 73_500 })).toBe(0);
    expect((await row(db.id)).agent_id).toBe(A);
  });
});

describe("planned switchover", () => {
  it("waits for the standby to trail by under 1 MiB, fences the primary, waits for all its WAL, then promotes; 202's operation names both members", async () => {
    await registerAgent(h, C, { capacity: 10 });
    const db = await runningPrimary();
    await setHa(db.id, 1);
    await seedAndRun(db.id);
    const [s] = await standbyRows(db.id);
    const { operation } = await h.dbs.failover({ organizationId: ORG, databaseId: db.id });
    expect(operation).toMatchObject({ type: "failover", status: "running", reason: "planned switchover requested", toMember: s.id });
    // A second request while it runs: 409.
    expect((await expectCode(h.dbs.failover({ organizationId: ORG, databaseId: db.id }), Code.FailedPrecondition)).rawMessage).toBe(
      "a switchover is already under way",
    );
    const state = { ...createSupervisorState(), healthySince: new Date(Date.now() - 3600_000), lastPassAt: Date.now() };
    // The standby trails by more than 1 MiB: the primary keeps taking writes (not fenced, its lease renewed).
    await reportWal(A, db.id, ObservedState.RUNNING, 5_000_000n);
    await reportWal(B, s.id, ObservedState.RUNNING, 1_000_000n);
    await superviseHighAvailability(h.ctx, state);
    expect((await specOf(h, A, db.id))!.fenced).toBe(false);
    expect((await renew(A)).databaseIds).toEqual([db.id]);
    // Nearly caught up: the primary's spec fences it (no new generation: nothing restarts), its lease is not renewed.
    await reportWal(B, s.id, ObservedState.RUNNING, 4_500_000n);
    await superviseHighAvailability(h.ctx, state);
    const spec = (await specOf(h, A, db.id))!;
    expect(spec.fenced).toBe(true);
    expect(spec.generation).toBe(BigInt((await row(db.id)).generation));
    expect((await renew(A)).databaseIds).toEqual([]);
    // Not reported fenced yet: nothing.
    expect(await superviseHighAvailability(h.ctx, state)).toBe(0);
    expect((await row(db.id)).agent_id).toBe(A);
    await reportWal(A, db.id, ObservedState.RUNNING, 8000n, { fenced: true });
    // The standby has less than the primary's last WAL: wait.
    await reportWal(B, s.id, ObservedState.RUNNING, 7000n);
    await superviseHighAvailability(h.ctx, state);
    expect((await row(db.id)).agent_id).toBe(A);
    await reportWal(B, s.id, ObservedState.RUNNING, 8000n);
    await superviseHighAvailability(h.ctx, state);
    expect(await row(db.id)).toMatchObject({ agent_id: B, adopt_instance_id: s.id, status: "starting", switchover_to: null });
    await reportWal(B, db.id, ObservedState.RUNNING, 9000n);
    const op = (await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations.find((o) => o.id === operation!.id)!;
    expect(op).toMatchObject({ status: "succeeded", toMember: s.id });
    expect(op.reason).toMatch(/^planned switchover: the primary was fenced at WAL position 8000 and the standby had received 8000/);
    expect((await snapshot(h, A)).discardInstanceIds).toEqual([db.id]);
  });

  it("409 without standbys, without a healthy one, or when the database is not running", async () => {
    const db = await runningPrimary();
    expect((await expectCode(h.dbs.failover({ organizationId: ORG, databaseId: db.id }), Code.FailedPrecondition)).rawMessage).toBe(
      "the database has no standbys to fail over to; set standbys first (PUT …/high-availability)",
    );
    await setHa(db.id, 1);
    expect((await expectCode(h.dbs.failover({ organizationId: ORG, databaseId: db.id }), Code.FailedPrecondition)).rawMessage).toBe(
      "no healthy standby to fail over to (running, streaming, on a live host); try again once one is",
    );
    await h.dbs.stopDatabase({ organizationId: ORG, id: db.id });
    expect((await expectCode(h.dbs.failover({ organizationId: ORG, databaseId: db.id }), Code.FailedPrecondition)).rawMessage).toBe(
      "cannot fail over a database that is stopping",
    );
  });

  it("is called off when the standby does not catch up in time: the primary unfenced, the operation failed", async () => {
    const db = await runningPrimary();
    await setHa(db.id, 1);
    await seedAndRun(db.id);
    const { operation } = await h.dbs.failover({ organizationId: ORG, databaseId: db.id });
    // Close enough: fenced; then the standby never receives the rest.
    await reportWal(A, db.id, ObservedState.RUNNING, 8000n);
    await reportWal(B, (await standbyRows(db.id))[0].id, ObservedState.RUNNING, 7000n);
    await superviseHighAvailability(h.ctx, {
      ...createSupervisorState(),
      healthySince: new Date(Date.now() - 3600_000),
      lastPassAt: Date.now(),
    });
    expect((await specOf(h, A, db.id))!.fenced).toBe(true);
    await reportWal(A, db.id, ObservedState.RUNNING, 8000n, { fenced: true });
    const state = { ...createSupervisorState(), healthySince: new Date(Date.now() - 3600_000), lastPassAt: Date.now() + 30_500 };
    await superviseHighAvailability(at(later(31)), state);
    expect((await row(db.id)).switchover_to).toBeNull();
    expect((await specOf(h, A, db.id))!.fenced).toBe(false);
    const op = (await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations.find((o) => o.id === operation!.id)!;
    expect(op).toMatchObject({
      status: "failed",
      error: "the standby did not receive all of the primary's WAL within 30 s; the primary keeps running",
    });
    expect((await renew(A)).databaseIds).toEqual([db.id]);
  });

  it("is called off, the primary never fenced, when the standby stays far behind", async () => {
    const db = await runningPrimary();
    await setHa(db.id, 1);
    await seedAndRun(db.id);
    const { operation } = await h.dbs.failover({ organizationId: ORG, databaseId: db.id });
    await reportWal(A, db.id, ObservedState.RUNNING, 90_000_000n, { clock: later(30) });
    await reportWal(B, (await standbyRows(db.id))[0].id, ObservedState.RUNNING, 1000n, { clock: later(30) });
    await superviseHighAvailability(at(later(31)), {
      ...createSupervisorState(),
      healthySince: new Date(Date.now() - 3600_000),
      lastPassAt: Date.now() + 30_500,
    });
    expect(await row(db.id)).toMatchObject({ switchover_to: null, switchover_fenced_at: null });
    const op = (await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations.find((o) => o.id === operation!.id)!;
    expect(op).toMatchObject({ status: "failed", error: "the standby did not catch up within 30 s; the primary keeps running" });
  });
});

describe("a standby's host lost", () => {
  /** A supervisor as of `offsetS` seconds from now that has run its passes without a gap for an hour. */
  const steadyAt = (offsetS: number): SupervisorState => ({
    ...createSupervisorState(),
    healthySince: new Date(Date.now() - 3600_000),
    lastPassAt: Date.now() + offsetS * 1000 - 500,
  });
  const pass = (offsetS: number, state = steadyAt(offsetS)) => superviseHighAvailability(at(later(offsetS)), state);
  /** Agents heard from at `offsetS` seconds from now (a lease renewal, as every agent sends every 2 s). */
  const heard = async (offsetS: number, ...agents: string[]) => {
    for (const a of agents) await renew(a, later(offsetS));
  };
  const replacedOps = async (id: string) =>
    (await h.dbs.listOperations({ organizationId: ORG, databaseId: id })).operations.filter((o) => o.type === "standby_replaced");

  it("is retired once its agent was silent past HA_STANDBY_REPLACE_AFTER_SECONDS (120 s), never before; one replacement on a third host, even with two passes at once", async () => {
    expect(h.ctx.cfg.haStandbyReplaceAfterSeconds).toBe(120);
    await registerAgent(h, C, { capacity: 10 });
    const db = await runningPrimary();
    await setHa(db.id, 1, true);
    await seedAndRun(db.id);
    const [old] = await standbyRows(db.id);
    expect(old.agent_id).toBe(B);
    expect((await specOf(h, A, db.id))!).toMatchObject({
      synchronousStandbyNames: `ANY 1 ("${old.id}")`,
      replicationSlots: [slotName(old.id)],
    });

    // B silent for 110 s: under the threshold, nothing happens (the standby only drops out of the synchronous ones).
    await heard(109, A, C);
    expect(await pass(110)).toBe(0);
    expect((await standbyRows(db.id)).map((s) => [s.id, s.deleted_at])).toEqual([[old.id, null]]);
    // B heard from at +100: the threshold counts from its last report, so at +200 it has been silent 100 s only.
    await heard(100, B);
    await heard(199, A, C);
    await pass(200);
    expect((await standbyRows(db.id)).map((s) => s.id)).toEqual([old.id]);
    // Silent for 130 s, but the supervisor (its control plane) just came back: every agent gets the threshold to report.
    await heard(229, A, C);
    await pass(230, createSupervisorState());
    expect((await standbyRows(db.id)).map((s) => s.id)).toEqual([old.id]);
    expect(await replacedOps(db.id)).toEqual([]);

    // The retirement twice at once (past the supervisor's advisory lock: the rows' locks decide), then two passes at
    // once (two instances of the service) and another: one retirement, one replacement.
    const retired = await Promise.all([
      replaceLostStandbys(at(later(230)), db.id, new Date(Date.now() - 3600_000)),
      replaceLostStandbys(at(later(230)), db.id, new Date(Date.now() - 3600_000)),
    ]);
    expect(retired.flat()).toEqual([old.id]);
    await Promise.all([pass(230), pass(230)]);
    await pass(236);
    const standbys = await standbyRows(db.id);
    expect(standbys.map((s) => [s.agent_id, s.port, s.status])).toEqual([[C, db.port, "provisioning"]]);
    const replacement = standbys[0];
    // All standbys ever made for it: the retired one and its replacement only.
    expect((await h.ctx.pool.query("SELECT count(*)::int AS n FROM databases WHERE primary_id = $1 AND standby", [db.id])).rows[0].n).toBe(
      2,
    );

    // The old standby is retired as a deleted standby is: hidden, purged on B, billed no more.
    expect(await row(old.id)).toMatchObject({ status: "deleted", desired_state: "purged" });
    expect((await row(old.id)).deleted_at).not.toBeNull();
    expect((await specOf(h, B, old.id))!.desiredState).toBe(DesiredState.PURGED);
    while ((await relayOutboxOnce(h.ctx)) > 0) {}
    expect(
      h.billing
        .delivered()
        .filter((e) => e.databaseId === old.id)
        .map((e) => e.status)
        .at(-1),
    ).toBe("deleted");
    // The primary's spec: the replacement's slot instead of the old one's, no synchronous standby until it streams.
    expect((await specOf(h, A, db.id))!).toMatchObject({ synchronousStandbyNames: "", replicationSlots: [slotName(replacement.id)] });
    expect((await ha(db.id)).members.map((m) => [m.id, m.role, m.status])).toEqual([
      [expect.stringMatching(/^node-/), "primary", "running"],
      [replacement.id, "standby", "provisioning"],
    ]);
    // The customer sees why, in one operation.
    const ops = await replacedOps(db.id);
    expect(ops).toHaveLength(1);
    expect(ops[0]).toMatchObject({ status: "succeeded", fromMember: old.id, toMember: replacement.id });
    expect(ops[0]!.reason).toMatch(
      new RegExp(
        `^the standby ${old.id}'s host ha-b was not heard from since \\S+ \\(13\\d s\\), longer than the 120 s a standby's host may be ` +
          `silent: the standby was retired \\(its data is removed if that host returns\\); its replacement ${replacement.id} was placed on ha-c at `,
      ),
    );

    // B comes back with the old standby running (a report of its old spec): it stays retired, it is not counted.
    await h.agentsWith({ clock: later(240) }).reportInstances({
      agentId: B,
      instances: [
        {
          databaseId: old.id,
          state: ObservedState.RUNNING,
          observedGeneration: BigInt(old.generation),
          appliedCredentialsGeneration: 0n,
          message: "",
          walPosition: 9000n,
          replicationAddress: "127.0.0.1",
          replicationPort: 40000,
        },
      ],
    });
    expect((await row(old.id)).status).toBe("deleted");
    expect((await ha(db.id)).members.map((m) => m.id)).not.toContain(old.id);
    // Nor promoted: the primary's host lost now, the returning B reporting after the lease ended, no failover to it.
    await heard(250, B, C);
    expect(await pass(253)).toBe(0);
    expect((await row(db.id)).agent_id).toBe(A);
    // B purges it (its spec says purged) and reports so: gone from B's assignments.
    const purgeSpec = (await specOf(h, B, old.id))!;
    await report(h, B, old.id, ObservedState.PURGED, { generation: purgeSpec.generation, credentials: purgeSpec.credentialsGeneration });
    expect((await snapshot(h, B)).instances.map((i) => i.databaseId)).not.toContain(old.id);
  });

  it("with no other host apart from the primary and the other standby, the lost one is retired and replaced once a host registers", async () => {
    await registerAgent(h, C, { capacity: 10 });
    const db = await runningPrimary();
    await setHa(db.id, 2);
    await seedAndRun(db.id);
    const before = await standbyRows(db.id);
    expect(before.map((s) => s.agent_id).sort()).toEqual([B, C]);
    const lost = before.find((s) => s.agent_id === B)!;
    const kept = before.find((s) => s.agent_id === C)!;

    // B silent for 130 s; A holds the primary and C the other standby: no host for a replacement. Two passes at once.
    await heard(129, A, C);
    await Promise.all([pass(130), pass(130)]);
    expect((await standbyRows(db.id)).map((s) => s.id)).toEqual([kept.id]);
    expect((await row(lost.id)).status).toBe("deleted");
    expect((await specOf(h, A, db.id))!.replicationSlots).toEqual([slotName(kept.id)]);
    const ops = await replacedOps(db.id);
    expect(ops).toHaveLength(1);
    const [op] = ops;
    expect(op).toMatchObject({ status: "succeeded", fromMember: lost.id, toMember: "" });
    expect(op!.reason).toMatch(
      new RegExp(
        `; no other host of region fsn1 can take a replacement now \\(live, with PostgreSQL 17, capacity left and port ${db.port} free, ` +
          "apart from the primary and the other standbys\\): the next standby placed for the database replaces it$",
      ),
    );
    // Later passes keep looking: still no host.
    await heard(139, A, C);
    await pass(140);
    expect((await standbyRows(db.id)).map((s) => s.id)).toEqual([kept.id]);

    // D registers: the next pass places the replacement there (once, two passes at once) and the operation names it.
    await registerAgent(h, D, { capacity: 10 });
    await heard(149, A, C, D);
    await Promise.all([pass(150), pass(150)]);
    const after = await standbyRows(db.id);
    expect(after.map((s) => [s.agent_id, s.port])).toEqual([
      [C, db.port],
      [D, db.port],
    ]);
    const placed = after.find((s) => s.agent_id === D)!;
    const [done] = await replacedOps(db.id);
    expect(done).toMatchObject({ fromMember: lost.id, toMember: placed.id });
    expect(done!.reason).toMatch(
      new RegExp(`the next standby placed for the database replaces it; its replacement ${placed.id} was placed on ha-d at `),
    );
    expect((await specOf(h, A, db.id))!.replicationSlots.sort()).toEqual([slotName(kept.id), slotName(placed.id)].sort());
  });

  it("is left alone while the primary is down too: the silent standby may be the way back", async () => {
    await registerAgent(h, C, { capacity: 10 });
    const db = await runningPrimary();
    await setHa(db.id, 1);
    await seedAndRun(db.id);
    const [s] = await standbyRows(db.id);
    // A and B both silent for 130 s (two failures at once); C alive.
    await heard(129, C);
    await pass(130);
    expect((await standbyRows(db.id)).map((x) => x.id)).toEqual([s.id]);
    expect(await replacedOps(db.id)).toEqual([]);
  });
});
