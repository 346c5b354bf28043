// All SQL of `backups` and `restore_windows`: the backups asked for and reported, and each database's restore window.
import type pg from "pg";
import { traceContext } from "@dbaas/kit";

type Db = pg.Pool | pg.ClientBase;

export type BackupType = "scheduled" | "manual";
export type BackupStatus = "running" | "completed" | "failed";

export interface BackupRow {
  id: string;
  database_id: string;
  type: BackupType;
  status: BackupStatus;
  started_at: Date;
  completed_at: Date | null;
  size_bytes: string;
  failure_reason: string;
}

export interface WindowRow {
  earliest_restore_time: Date | null;
  latest_restore_time: Date | null;
  archive_error: string;
  spool_bytes: string;
  /** Whether the database has a completed backup: without one there is nothing to restore from. */
  has_completed: boolean;
}

/**
 * A running backup of the database, started at `startedAt`; undefined when one
 * is running already (the partial unique index decides, so a race loses too).
 * It keeps the asking request's trace context, which its agent's work continues.
 */
export async function insertBackup(
  db: pg.ClientBase,
  b: { id: string; databaseId: string; type: BackupType; startedAt: Date },
): Promise<BackupRow | undefined> {
  const { rows } = await db.query<BackupRow>(
    `INSERT INTO backups (id, database_id, type, status, started_at, trace_context) VALUES ($1, $2, $3, 'running', $4, $5)
     ON CONFLICT (database_id) WHERE status = 'running' DO NOTHING RETURNING *`,
    [b.id, b.databaseId, b.type, b.startedAt, traceContext()],
  );
  return rows[0];
}

/** One page of a database's backups, newest first, and how many there are in all. */
export async function listBackups(
  db: Db,
  databaseId: string,
  limit: number,
  offset: number,
): Promise<{ rows: BackupRow[]; total: number }> {
  const [{ rows }, count] = await Promise.all([
    db.query<BackupRow>("SELECT * FROM backups WHERE database_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2 OFFSET $3", [
      databaseId,
      limit,
      offset,
    ]),
    db.query<{ n: number }>("SELECT count(*)::int AS n FROM backups WHERE database_id = $1", [databaseId]),
  ]);
  return { rows, total: count.rows[0]!.n };
}

/** Backup `id` of database `databaseId`, locked for the caller's transaction; undefined when the database has no such backup. */
export async function lockBackup(db: pg.ClientBase, databaseId: string, id: string): Promise<BackupRow | undefined> {
  const { rows } = await db.query<BackupRow>("SELECT * FROM backups WHERE id = $1 AND database_id = $2 FOR UPDATE", [id, databaseId]);
  return rows[0];
}

/** When the agent says a running backup really started. */
export async function setBackupStarted(db: pg.ClientBase, id: string, startedAt: Date): Promise<void> {
  await db.query("UPDATE backups SET started_at = $2 WHERE id = $1 AND status = 'running'", [id, startedAt]);
}

export async function completeBackup(db: pg.ClientBase, id: string, completedAt: Date, sizeBytes: bigint): Promise<void> {
  await db.query("UPDATE backups SET status = 'completed', completed_at = $2, size_bytes = $3, failure_reason = '' WHERE id = $1", [
    id,
    completedAt,
    String(sizeBytes),
  ]);
}

export async function failBackup(db: pg.ClientBase, id: string, failedAt: Date, reason: string): Promise<void> {
  await db.query("UPDATE backups SET status = 'failed', completed_at = $2, failure_reason = $3 WHERE id = $1", [id, failedAt, reason]);
}

export async function deleteBackup(db: pg.ClientBase, id: string): Promise<void> {
  await db.query("DELETE FROM backups WHERE id = $1", [id]);
}

/** The database's last reported restore window and archiving health; undefined before its agent's first report. */
export async function windowOf(db: Db, databaseId: string): Promise<WindowRow | undefined> {
  const { rows } = await db.query<WindowRow>(
    `SELECT earliest_restore_time, latest_restore_time, archive_error, spool_bytes,
       EXISTS (SELECT 1 FROM backups b WHERE b.database_id = w.database_id AND b.status = 'completed') AS has_completed
     FROM restore_windows w WHERE database_id = $1`,
    [databaseId],
  );
  return rows[0];
}

export interface ReportedWindow {
  /** Both set, or both unset: the window is kept as it was. */
  earliest?: Date;
  latest?: Date;
  archiveError: string;
  spoolBytes: bigint;
  reportedAt: Date;
}

/** Records an agent's report of the window and archiving; the latest restorable instant never moves backwards. */
export async function saveWindow(db: pg.ClientBase, databaseId: string, w: ReportedWindow): Promise<void> {
  await db.query(
    `INSERT INTO restore_windows (database_id, earliest_restore_time, latest_restore_time, archive_error, spool_bytes, reported_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (database_id) DO UPDATE SET
       earliest_restore_time = COALESCE(EXCLUDED.earliest_restore_time, restore_windows.earliest_restore_time),
       latest_restore_time = GREATEST(EXCLUDED.latest_restore_time, restore_windows.latest_restore_time),
       archive_error = EXCLUDED.archive_error, spool_bytes = EXCLUDED.spool_bytes, reported_at = EXCLUDED.reported_at`,
    [databaseId, w.earliest ?? null, w.latest ?? null, w.archiveError, String(w.spoolBytes), w.reportedAt],
  );
}

/** A purged database's backups and window: its blob-store prefix is gone with its data. */
export async function deleteBackupsOf(db: pg.ClientBase, databaseId: string): Promise<void> {
  await db.query("DELETE FROM backups WHERE database_id = $1", [databaseId]);
  await db.query("DELETE FROM restore_windows WHERE database_id = $1", [databaseId]);
}

/** Serializes the scheduling of backups (the per-agent cap) to the end of the caller's transaction, across replicas. */
export async function lockSchedule(db: pg.ClientBase): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext('backup-schedule'))");
}

/** Fails the running backups of databases no longer meant to run (stopped, deleted): their agent will not take them. */
export async function abandonBackups(db: pg.ClientBase, now: Date): Promise<BackupRow[]> {
  const { rows } = await db.query<BackupRow>(
    `UPDATE backups b SET status = 'failed', completed_at = $1,
       failure_reason = 'the database stopped running before the backup completed'
     FROM databases d WHERE d.id = b.database_id AND b.status = 'running' AND d.desired_state <> 'running'
     RETURNING b.*`,
    [now],
  );
  return rows;
}

export interface DueBackup {
  database_id: string;
  agent_id: string;
  generation: string;
}

/**
 * The running databases due a scheduled backup by `now`, at most `maxPerAgent`
 * running backups per agent counting those already running, the longest due
 * first. Due: never backed up (since it was created); `dailyS` after the newest
 * completed or running backup started; `retryS` after a failed one ended.
 */
export async function dueBackups(
  db: pg.ClientBase,
  now: Date,
  o: { maxPerAgent: number; dailyS: number; retryS: number },
): Promise<DueBackup[]> {
  const { rows } = await db.query<DueBackup>(
    `WITH running AS (
       SELECT d.agent_id, count(*)::int AS n FROM backups b JOIN databases d ON d.id = b.database_id
       WHERE b.status = 'running' GROUP BY d.agent_id
     ), due AS (
       SELECT d.id, d.agent_id, d.generation,
         GREATEST(COALESCE(good.at + make_interval(secs => $3), d.created_at),
                  COALESCE(bad.at + make_interval(secs => $4), '-infinity')) AS due_at
       FROM databases d
       LEFT JOIN LATERAL (SELECT max(started_at) AS at FROM backups
                          WHERE database_id = d.id AND status IN ('completed', 'running')) good ON true
       LEFT JOIN LATERAL (SELECT max(COALESCE(completed_at, started_at)) AS at FROM backups
                          WHERE database_id = d.id AND status = 'failed') bad ON true
       WHERE d.deleted_at IS NULL AND d.primary_id IS NULL AND d.status = 'running' AND d.desired_state = 'running'
         AND NOT EXISTS (SELECT 1 FROM backups r WHERE r.database_id = d.id AND r.status = 'running')
     )
     SELECT q.id AS database_id, q.agent_id, q.generation FROM (
       SELECT due.*, row_number() OVER (PARTITION BY due.agent_id ORDER BY due.due_at, due.id) AS rank
       FROM due WHERE due.due_at <= $1
     ) q LEFT JOIN running r ON r.agent_id = q.agent_id
     WHERE q.rank <= $2 - COALESCE(r.n, 0)
     ORDER BY q.agent_id, q.rank`,
    [now, o.maxPerAgent, o.dailyS, o.retryS],
  );
  return rows;
}
