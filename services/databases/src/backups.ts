import { timestampDate } from "@bufbuild/protobuf/wkt";
import { conflict, newId, withTransaction } from "@dbaas/kit";
import { BackupState, type BackupObservation, type DatabaseBackups } from "@dbaas/proto/agent";
import type pg from "pg";
import type { AppContext } from "./context.ts";
import {
  completeBackup,
  deleteBackup,
  failBackup,
  insertBackup,
  lockBackup,
  saveWindow,
  setBackupStarted,
  windowOf,
  type BackupRow,
  type WindowRow,
} from "./db/backups.ts";
import { lockHosted, lockOwned } from "./db/databases.ts";
import { notifyAgent } from "./db/notify.ts";
import { finishBackupOperation, recordOperation, startBackupOperation } from "./db/operations.ts";
import { transitionFrom } from "./lifecycle.ts";
import { reconcileSeeds } from "./replicas.ts";

/** The reason a failed backup gets when its agent gave none. */
export const DEFAULT_BACKUP_FAILURE = "the backup failed";

/**
 * A manual base backup of the organization's database `databaseId`, which must
 * be running; one at a time (FAILED_PRECONDITION while one runs). Its agent
 * gets it in the spec's backup_ids and reports the outcome (applyBackupReport).
 */
export function startManualBackup(ctx: AppContext, orgId: string, databaseId: string): Promise<BackupRow> {
  return withTransaction(ctx.pool, async (db) => {
    const row = await lockOwned(db, orgId, databaseId);
    transitionFrom("backup", row.status);
    const backup = await insertBackup(db, { id: newId("bkp"), databaseId: row.id, type: "manual", startedAt: ctx.clock.now() });
    if (!backup) throw conflict("a backup is already running");
    await startBackupOperation(db, row.id, backup.id, row.generation);
    await notifyAgent(db, row.agent_id);
    return backup;
  });
}

/** The instants a database can be restored to, both ends included; undefined while it has no completed backup. */
export function restorable(w: WindowRow | undefined): { earliest: Date; latest: Date } | undefined {
  if (!w?.has_completed || !w.earliest_restore_time || !w.latest_restore_time) return undefined;
  return { earliest: w.earliest_restore_time, latest: w.latest_restore_time };
}

/**
 * Applies what agent `agentId` reports of one database it hosts (a report
 * about another agent's database is ignored): its backups' outcomes, its
 * restore window, and whether WAL archiving works — which becomes an operation
 * `wal_archive` (failed, with the reason) when it stops and one (succeeded)
 * when it resumes. A resent report changes nothing.
 */
export async function applyBackupReport(ctx: AppContext, agentId: string, report: DatabaseBackups): Promise<void> {
  await withTransaction(ctx.pool, async (db) => {
    const row = await lockHosted(db, agentId, report.databaseId);
    if (!row) return;
    let changed = false;
    for (const obs of report.backups) {
      if (await applyBackupObservation(ctx, db, row.id, obs)) changed = true;
    }
    // Settled backups leave the spec's backup_ids; a settled backup may be a replica's seed, or free the primary for one.
    if (changed) {
      await notifyAgent(db, row.agent_id);
      await reconcileSeeds(ctx, db, row);
    }

    const before = await windowOf(db, row.id);
    const window = report.earliestRestoreTime && report.latestRestoreTime;
    await saveWindow(db, row.id, {
      earliest: window ? timestampDate(report.earliestRestoreTime!) : undefined,
      latest: window ? timestampDate(report.latestRestoreTime!) : undefined,
      archiveError: report.archiveError,
      spoolBytes: report.spoolBytes,
      reportedAt: ctx.clock.now(),
    });
    const failing = (before?.archive_error ?? "") !== "";
    if (!failing && report.archiveError !== "") {
      ctx.log.warn("WAL archiving is failing", { database_id: row.id, agent_id: agentId, reason: report.archiveError });
      await recordOperation(db, row.id, "wal_archive", row.generation, report.archiveError);
    } else if (failing && report.archiveError === "") {
      ctx.log.info("WAL archiving resumed", { database_id: row.id, agent_id: agentId });
      await recordOperation(db, row.id, "wal_archive", row.generation, "");
    }
  });
}

/**
 * One backup's news, applied to the database's backup of that id (another id
 * is ignored); answers whether it changed the backup's status. A completed
 * backup stays completed; a failed one becomes completed when its agent finds
 * it stored after all (the agent's records in the blob store are the truth).
 */
async function applyBackupObservation(ctx: AppContext, db: pg.ClientBase, databaseId: string, obs: BackupObservation): Promise<boolean> {
  const backup = await lockBackup(db, databaseId, obs.backupId);
  if (!backup) return false;
  switch (obs.state) {
    case BackupState.RUNNING:
      if (obs.startedAt) await setBackupStarted(db, backup.id, timestampDate(obs.startedAt));
      return false;
    case BackupState.COMPLETED:
      if (backup.status === "completed") return false;
      await completeBackup(db, backup.id, obs.completedAt ? timestampDate(obs.completedAt) : ctx.clock.now(), obs.sizeBytes);
      await finishBackupOperation(db, backup.id, "");
      return true;
    case BackupState.FAILED: {
      if (backup.status !== "running") return false;
      const reason = obs.message || DEFAULT_BACKUP_FAILURE;
      await failBackup(db, backup.id, obs.completedAt ? timestampDate(obs.completedAt) : ctx.clock.now(), reason);
      await finishBackupOperation(db, backup.id, reason);
      return true;
    }
    case BackupState.PRUNED:
      await deleteBackup(db, backup.id);
      if (backup.status === "running") await finishBackupOperation(db, backup.id, "removed by retention before it completed");
      return backup.status === "running";
    default:
      return false;
  }
}
