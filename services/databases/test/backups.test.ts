import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { BackupState, ObservedState } from "@dbaas/proto/agent";
import { BackupStatus, BackupType } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepExpiredDeletions } from "../src/background.ts";
import {
  completeBackup,
  createDb,
  createHarness,
  expectCode,
  registerAgent,
  report,
  reportBackups,
  runningDb,
  specOf,
  violationsOf,
  type Harness,
} from "./harness.ts";

// Manual backups, the agent's reports and the restore window. No scheduled backups here (the per-agent cap is 0):
// backup-schedule.test.ts covers the schedule.

let h: Harness;
const AGENT = "bkp-a";
const OTHER_AGENT = "bkp-b";
const ORG = "org-bkp";

beforeAll(async () => {
  h = await createHarness({ BACKUP_MAX_RUNNING_PER_AGENT: "0" });
  await registerAgent(h, AGENT, { capacity: 1000 });
  await registerAgent(h, OTHER_AGENT, { regions: ["hel1"] });
});

afterAll(async () => {
  await h?.close();
});

const list = (databaseId: string, o: { page?: number; perPage?: number } = {}) =>
  h.dbs.listBackups({ organizationId: ORG, databaseId, page: o.page ?? 0, perPage: o.perPage ?? 0 });
const backup = (databaseId: string) => h.dbs.createBackup({ organizationId: ORG, databaseId });
const operations = async (databaseId: string) =>
  (await h.dbs.listOperations({ organizationId: ORG, databaseId, perPage: 100 })).operations.map((o) => [o.type, o.status, o.error]);
const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

async function runningId(): Promise<string> {
  return (await runningDb(h, ORG, AGENT)).database!.id;
}

describe("CreateBackup", () => {
  it("starts a manual backup of a running database: listed running, in the agent's spec, an operation", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    expect(b).toMatchObject({ databaseId: id, type: BackupType.MANUAL, status: BackupStatus.RUNNING, sizeBytes: 0n, failureReason: "" });
    expect(b!.id).toMatch(/^bkp-[a-z0-9]+$/);
    expect(b!.completedAt).toBeUndefined();
    expect((await list(id)).backups.map((x) => x.id)).toEqual([b!.id]);
    expect((await specOf(h, AGENT, id))!.backupIds).toEqual([b!.id]);
    expect((await operations(id))[0]).toEqual(["backup", "running", ""]);
  });

  it("runs one at a time: 409 while one runs, also for two at once; another once it completed", async () => {
    const id = await runningId();
    const results = await Promise.allSettled([backup(id), backup(id)]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const first = (results.find((r) => r.status === "fulfilled") as PromiseFulfilledResult<Awaited<ReturnType<typeof backup>>>).value;
    const err = await expectCode(backup(id), Code.FailedPrecondition);
    expect(err.rawMessage).toBe("a backup is already running");

    await completeBackup(h, AGENT, id, first.backup!.id);
    expect((await specOf(h, AGENT, id))!.backupIds).toEqual([]);
    const second = await backup(id);
    expect((await list(id)).backups.map((x) => x.id)).toEqual([second.backup!.id, first.backup!.id]);
  });

  it("needs a running database: 409 naming the status", async () => {
    const { database } = await createDb(h, ORG);
    expect((await expectCode(backup(database!.id), Code.FailedPrecondition)).rawMessage).toBe(
      "cannot back up a database that is provisioning",
    );
    const id = await runningId();
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    expect((await expectCode(backup(id), Code.FailedPrecondition)).rawMessage).toBe("cannot back up a database that is stopping");
    await report(h, AGENT, id, ObservedState.STOPPED);
    expect((await expectCode(backup(id), Code.FailedPrecondition)).rawMessage).toBe("cannot back up a database that is stopped");
  });

  it("is NOT_FOUND for another organization's database or a deleted one", async () => {
    const id = await runningId();
    await expectCode(h.dbs.createBackup({ organizationId: "org-other", databaseId: id }), Code.NotFound);
    await expectCode(h.dbs.listBackups({ organizationId: "org-other", databaseId: id }), Code.NotFound);
    await h.dbs.deleteDatabase({ organizationId: ORG, id });
    await expectCode(backup(id), Code.NotFound);
    await expectCode(list(id), Code.NotFound);
  });
});

describe("ListBackups", () => {
  it("lists newest first, a page at a time; paging outside the bounds is INVALID_ARGUMENT", async () => {
    const id = await runningId();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { backup: b } = await backup(id);
      ids.unshift(b!.id);
      await completeBackup(h, AGENT, id, b!.id);
    }
    const first = await list(id, { perPage: 2 });
    expect(first).toMatchObject({ total: 3, page: 1, perPage: 2 });
    expect(first.backups.map((b) => b.id)).toEqual(ids.slice(0, 2));
    expect((await list(id, { page: 2, perPage: 2 })).backups.map((b) => b.id)).toEqual(ids.slice(2));
    expect(first.backups[0]).toMatchObject({ status: BackupStatus.COMPLETED, sizeBytes: 1234n });

    const bad = await expectCode(list(id, { page: -1, perPage: 101 }), Code.InvalidArgument);
    expect(violationsOf(bad).map((v) => v.field)).toEqual(["page", "per_page"]);
  });

  it("shows the window only once a backup completed, and why archiving fails", async () => {
    const id = await runningId();
    const before = await list(id);
    expect([before.earliestRestoreTime, before.latestRestoreTime, before.archiveError]).toEqual([undefined, undefined, ""]);
    const { backup: b } = await backup(id);
    // A window reported before any backup completed is not one yet.
    await reportBackups(h, AGENT, id, { window: [minutesAgo(10), minutesAgo(1)], archiveError: "backup store unreachable" });
    const failing = await list(id);
    expect([failing.earliestRestoreTime, failing.latestRestoreTime, failing.archiveError]).toEqual([
      undefined,
      undefined,
      "backup store unreachable",
    ]);

    const window: [Date, Date] = [minutesAgo(5), minutesAgo(0)];
    await completeBackup(h, AGENT, id, b!.id, window);
    const listed = await list(id);
    expect([timestampDate(listed.earliestRestoreTime!), timestampDate(listed.latestRestoreTime!)]).toEqual(window);
    expect(listed.archiveError).toBe("");
  });
});

describe("ReportBackups", () => {
  it("records the start, the completion and the size; a resent report changes nothing, a completed backup stays completed", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    const startedAt = new Date(Date.now() - 3000);
    await reportBackups(h, AGENT, id, { backups: [{ id: b!.id, state: BackupState.RUNNING, startedAt }] });
    expect(timestampDate((await list(id)).backups[0]!.startedAt!)).toEqual(startedAt);

    const completedAt = new Date();
    const done = { id: b!.id, state: BackupState.COMPLETED, completedAt, sizeBytes: 5_000_000n };
    await reportBackups(h, AGENT, id, { backups: [done] });
    const completed = (await list(id)).backups[0]!;
    expect(completed).toMatchObject({ status: BackupStatus.COMPLETED, sizeBytes: 5_000_000n, failureReason: "" });
    expect(timestampDate(completed.completedAt!)).toEqual(completedAt);
    const opsAfter = await operations(id);
    expect(opsAfter[0]).toEqual(["backup", "succeeded", ""]);

    await reportBackups(h, AGENT, id, { backups: [{ ...done, completedAt: new Date(), sizeBytes: 1n }] });
    await reportBackups(h, AGENT, id, { backups: [{ id: b!.id, state: BackupState.RUNNING, startedAt: new Date() }] });
    await reportBackups(h, AGENT, id, { backups: [{ id: b!.id, state: BackupState.FAILED, message: "late" }] });
    expect((await list(id)).backups[0]).toEqual(completed);
    expect(await operations(id)).toEqual(opsAfter);
  });

  it("records a failure with its reason on the backup and its operation; the agent finding it stored after all completes it", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    await reportBackups(h, AGENT, id, {
      backups: [{ id: b!.id, state: BackupState.FAILED, message: "connection reset during BASE_BACKUP" }],
    });
    expect((await list(id)).backups[0]).toMatchObject({
      status: BackupStatus.FAILED,
      failureReason: "connection reset during BASE_BACKUP",
    });
    expect((await operations(id))[0]).toEqual(["backup", "failed", "connection reset during BASE_BACKUP"]);
    expect((await specOf(h, AGENT, id))!.backupIds).toEqual([]);

    await completeBackup(h, AGENT, id, b!.id);
    expect((await list(id)).backups[0]).toMatchObject({ status: BackupStatus.COMPLETED, failureReason: "" });
    expect((await operations(id))[0]).toEqual(["backup", "succeeded", ""]);
  });

  it("applies only to databases the reporting agent hosts, and only their backups", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    await completeBackup(h, OTHER_AGENT, id, b!.id, [minutesAgo(5), minutesAgo(0)]);
    const other = await runningId();
    await completeBackup(h, AGENT, other, b!.id);
    const listed = await list(id);
    expect(listed.latestRestoreTime).toBeUndefined();
    expect(listed.backups.map((x) => x.status)).toEqual([BackupStatus.RUNNING]);
    await expectCode(h.agents.reportBackups({ agentId: "nobody", databases: [] }), Code.NotFound);
  });

  it("never moves the latest restorable instant back; the earliest follows retention", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    const window = async () => {
      const listed = await list(id);
      return [timestampDate(listed.earliestRestoreTime!), timestampDate(listed.latestRestoreTime!)];
    };
    const [t60, t30, t2, t1, t0] = [minutesAgo(60), minutesAgo(30), minutesAgo(2), minutesAgo(1), new Date()];
    await completeBackup(h, AGENT, id, b!.id, [t60, t1]);
    // Reports may cross: an older sample arriving late does not move the window's end back.
    await reportBackups(h, AGENT, id, { window: [t30, t2] });
    expect(await window()).toEqual([t30, t1]);
    // A report without a window (an agent that restarted and has not rebuilt it yet) keeps the one known.
    await reportBackups(h, AGENT, id, {});
    expect(await window()).toEqual([t30, t1]);
    await reportBackups(h, AGENT, id, { window: [t30, t0] });
    expect(await window()).toEqual([t30, t0]);
  });

  it("deletes a pruned backup; a resent PRUNED or a late COMPLETED does not bring it back", async () => {
    const id = await runningId();
    const { backup: old } = await backup(id);
    await completeBackup(h, AGENT, id, old!.id);
    const { backup: kept } = await backup(id);
    await completeBackup(h, AGENT, id, kept!.id);
    const pruned = { id: old!.id, state: BackupState.PRUNED };
    await reportBackups(h, AGENT, id, { backups: [pruned] });
    await reportBackups(h, AGENT, id, { backups: [pruned] });
    await completeBackup(h, AGENT, id, old!.id);
    expect((await list(id)).backups.map((b) => b.id)).toEqual([kept!.id]);
  });

  it("records archiving failing and resuming as wal_archive operations, once each", async () => {
    const id = await runningId();
    const reason = "backup store unreachable: connect ECONNREFUSED; WAL spool 12 MiB";
    await reportBackups(h, AGENT, id, { archiveError: reason, spoolBytes: 12n << 20n });
    await reportBackups(h, AGENT, id, { archiveError: reason, spoolBytes: 13n << 20n });
    expect((await list(id)).archiveError).toBe(reason);
    const walOps = async () => (await operations(id)).filter(([type]) => type === "wal_archive");
    expect(await walOps()).toEqual([["wal_archive", "failed", reason]]);

    await reportBackups(h, AGENT, id, {});
    await reportBackups(h, AGENT, id, {});
    expect((await list(id)).archiveError).toBe("");
    expect(await walOps()).toEqual([
      ["wal_archive", "succeeded", ""],
      ["wal_archive", "failed", reason],
    ]);
  });
});

describe("backups and the lifecycle", () => {
  it("a lifecycle operation neither supersedes nor settles a backup's operation", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    await h.dbs.restartDatabase({ organizationId: ORG, id });
    expect((await operations(id)).slice(0, 2)).toEqual([
      ["restart", "running", ""],
      ["backup", "running", ""],
    ]);
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect((await operations(id)).slice(0, 2)).toEqual([
      ["restart", "succeeded", ""],
      ["backup", "running", ""],
    ]);
    await completeBackup(h, AGENT, id, b!.id);
    expect((await operations(id)).slice(0, 2)).toEqual([
      ["restart", "succeeded", ""],
      ["backup", "succeeded", ""],
    ]);
  });

  it("a deleted database keeps its backups through retention; its purge takes them", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    await completeBackup(h, AGENT, id, b!.id, [minutesAgo(5), minutesAgo(0)]);
    await h.dbs.deleteDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.STOPPED);
    const count = async () => {
      const { rows } = await h.ctx.pool.query(
        "SELECT (SELECT count(*) FROM backups WHERE database_id = $1) + (SELECT count(*) FROM restore_windows WHERE database_id = $1) AS n",
        [id],
      );
      return Number(rows[0].n);
    };
    expect(await count()).toBe(2);

    await sweepExpiredDeletions({ ...h.ctx, clock: { now: () => new Date(Date.now() + (h.ctx.cfg.retentionSeconds + 60) * 1000) } });
    expect(await count()).toBe(2);
    await report(h, AGENT, id, ObservedState.PURGED);
    expect(await count()).toBe(0);
  });

  // What the backups are kept for: support brings the database back within retention, and its restore window
  // (the agent kept the store's files) is there again, so it can be restored to a point in time.
  it("a deleted database support brings back has its backups and window again, and can be restored from", async () => {
    const id = await runningId();
    const { backup: b } = await backup(id);
    const [earliest, latest] = [minutesAgo(5), minutesAgo(1)];
    await completeBackup(h, AGENT, id, b!.id, [earliest, latest]);
    await h.dbs.deleteDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.STOPPED);
    await expectCode(list(id), Code.NotFound);

    await h.dbsAs("support").restoreDatabase({ id });
    await report(h, AGENT, id, ObservedState.RUNNING);
    const listed = await list(id);
    expect(listed.backups.map((x) => [x.id, x.status])).toEqual([[b!.id, BackupStatus.COMPLETED]]);
    expect(timestampDate(listed.earliestRestoreTime!)).toEqual(earliest);
    expect(timestampDate(listed.latestRestoreTime!)).toEqual(latest);
    const restored = await h.dbs.restoreToTime({ organizationId: ORG, sourceDatabaseId: id, name: `back-${id.slice(-6)}` });
    expect(restored.database!.restoredFrom!.databaseId).toBe(id);
    expect(timestampDate(restored.database!.restoredFrom!.restoreTime!)).toEqual(latest);
  });
});
