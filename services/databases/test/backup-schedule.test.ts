import { createClient, createRouterTransport } from "@connectrpc/connect";
import type { Clock } from "@dbaas/kit";
import { BackupState, ObservedState } from "@dbaas/proto/agent";
import { BackupStatus, BackupType, DatabasesService } from "@dbaas/proto/databases";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startBackgroundWork } from "../src/background.ts";
import { BACKUP_EVERY_S, BACKUP_RETRY_S, scheduleBackups } from "../src/backup-schedule.ts";
import { routes } from "../src/routes.ts";
import {
  completeBackup,
  createDb,
  createHarness,
  eventually,
  registerAgent,
  report,
  reportBackups,
  resetTables,
  runningDb,
  specOf,
  type Harness,
} from "./harness.ts";

// The schedule: the first backup when a database first runs, then daily, an hour after a failure, at most
// BACKUP_MAX_RUNNING_PER_AGENT (2 here) running per agent. Time is the context's clock, moved by the tests.

let h: Harness;
const ORG = "org-sched";
const A = "sched-a";
const B = "sched-b";

beforeAll(async () => {
  h = await createHarness({ BACKUP_MAX_RUNNING_PER_AGENT: "2" });
});

afterAll(async () => {
  await h?.close();
});

beforeEach(async () => {
  await resetTables(h);
  await registerAgent(h, A, { capacity: 100 });
  await registerAgent(h, B, { capacity: 100, regions: ["hel1"], ports: [30000, 30999] });
});

/** A clock `offsetS` seconds from the real one. */
const inS = (offsetS: number): Clock => ({ now: () => new Date(Date.now() + offsetS * 1000) });
const scheduleAt = (clock: Clock) => scheduleBackups({ ...h.ctx, clock });

async function backupsOf(id: string) {
  return (await h.dbs.listBackups({ organizationId: ORG, databaseId: id })).backups;
}

/** Running backups, by agent, as database ids. */
async function runningByAgent(): Promise<Record<string, string[]>> {
  const { rows } = await h.ctx.pool.query<{ agent_id: string; ids: string[] }>(
    `SELECT d.agent_id, array_agg(d.id ORDER BY d.created_at) AS ids FROM backups b JOIN databases d ON d.id = b.database_id
     WHERE b.status = 'running' GROUP BY d.agent_id`,
  );
  return Object.fromEntries(rows.map((r) => [r.agent_id, r.ids]));
}

async function completeRunning(agentId: string, id: string) {
  const [running] = (await backupsOf(id)).filter((b) => b.status === BackupStatus.RUNNING);
  await completeBackup(h, agentId, id, running!.id, [new Date(Date.now() - 60_000), new Date()]);
}

describe("the backup schedule", () => {
  it("takes the first backup as the database first reports running, in the agent's next spec", async () => {
    const { database } = await createDb(h, ORG);
    const id = database!.id;
    expect(await backupsOf(id)).toEqual([]);
    await report(h, A, id, ObservedState.RUNNING);
    const [first] = await backupsOf(id);
    expect(first).toMatchObject({ type: BackupType.SCHEDULED, status: BackupStatus.RUNNING });
    expect((await specOf(h, A, id))!.backupIds).toEqual([first!.id]);
    const ops = (await h.dbs.listOperations({ organizationId: ORG, databaseId: id })).operations;
    expect(ops.map((o) => [o.type, o.status])).toEqual([
      ["backup", "running"],
      ["create", "succeeded"],
    ]);
  });

  it("runs at most two per agent, the longest due first; the others follow as backups finish", async () => {
    const onA: string[] = [];
    for (let i = 0; i < 4; i++) onA.push((await runningDb(h, ORG, A)).database!.id);
    const onB = (await runningDb(h, ORG, B, { region: "hel1" })).database!.id;
    expect(await runningByAgent()).toEqual({ [A]: onA.slice(0, 2), [B]: [onB] });
    // A pass changes nothing while the cap is reached.
    expect(await scheduleAt(h.ctx.clock)).toBe(0);

    await completeRunning(A, onA[1]!);
    expect(await scheduleAt(h.ctx.clock)).toBe(1);
    expect((await runningByAgent())[A]).toEqual([onA[0], onA[2]]);
    await completeRunning(A, onA[0]!);
    await completeRunning(A, onA[2]!);
    expect(await scheduleAt(h.ctx.clock)).toBe(1);
    expect((await runningByAgent())[A]).toEqual([onA[3]]);
  });

  it("backs a database up again a day after its last backup started, not before", async () => {
    const id = (await runningDb(h, ORG, A)).database!.id;
    await completeRunning(A, id);
    expect(await scheduleAt(inS(BACKUP_EVERY_S - 3600))).toBe(0);
    expect(await scheduleAt(inS(BACKUP_EVERY_S + 5))).toBe(1);
    const [daily, first] = await backupsOf(id);
    expect(daily).toMatchObject({ type: BackupType.SCHEDULED, status: BackupStatus.RUNNING });
    expect(first!.status).toBe(BackupStatus.COMPLETED);
  });

  it("counts a manual backup as the day's", async () => {
    const id = (await runningDb(h, ORG, A)).database!.id;
    await completeRunning(A, id);
    const halfDay = BACKUP_EVERY_S / 2;
    const dbsAt = createClient(DatabasesService, createRouterTransport(routes({ ...h.ctx, clock: inS(halfDay) })));
    await dbsAt.createBackup({ organizationId: ORG, databaseId: id });
    await completeRunning(A, id);
    expect(await scheduleAt(inS(BACKUP_EVERY_S + 5))).toBe(0);
    expect(await scheduleAt(inS(halfDay + BACKUP_EVERY_S + 5))).toBe(1);
  });

  it("retries an hour after a failed backup", async () => {
    const id = (await runningDb(h, ORG, A)).database!.id;
    const [first] = await backupsOf(id);
    await reportBackups(h, A, id, {
      backups: [{ id: first!.id, state: BackupState.FAILED, message: "disk full", completedAt: new Date() }],
    });
    expect(await scheduleAt(inS(BACKUP_RETRY_S - 60))).toBe(0);
    expect(await scheduleAt(inS(BACKUP_RETRY_S + 5))).toBe(1);
    expect((await backupsOf(id)).map((b) => b.status)).toEqual([BackupStatus.RUNNING, BackupStatus.FAILED]);
  });

  it("fails the running backup of a database that stopped, and leaves a stopped database alone", async () => {
    const id = (await runningDb(h, ORG, A)).database!.id;
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    await report(h, A, id, ObservedState.STOPPED);
    expect((await specOf(h, A, id))!.backupIds).toEqual([]);
    expect(await scheduleAt(inS(2 * BACKUP_EVERY_S))).toBe(0);
    expect(await backupsOf(id)).toMatchObject([
      { status: BackupStatus.FAILED, failureReason: "the database stopped running before the backup completed" },
    ]);
    const [op] = (await h.dbs.listOperations({ organizationId: ORG, databaseId: id })).operations.filter((o) => o.type === "backup");
    expect(op).toMatchObject({ status: "failed", error: "the database stopped running before the backup completed" });
  });

  it("looks at once when the background work starts, not an interval later", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await runningDb(h, ORG, A)).database!.id);
    // The third waits for a slot; a finished backup frees one, but only a pass of the schedule fills it.
    await completeRunning(A, ids[0]!);
    expect((await runningByAgent())[A]).toEqual([ids[1]]);

    const stop = new AbortController();
    const work = startBackgroundWork({ ...h.ctx, cfg: { ...h.ctx.cfg, backupScheduleIntervalMs: 3_600_000 } }, stop.signal);
    try {
      await eventually(async () => (await runningByAgent())[A]?.length === 2);
      expect((await runningByAgent())[A]).toEqual([ids[1], ids[2]]);
    } finally {
      stop.abort();
      await work;
    }
  });
});
