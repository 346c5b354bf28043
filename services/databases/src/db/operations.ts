// The `operations` table: every change a database's agent is to carry out, and how it ended.
import type pg from "pg";
import { newId } from "@dbaas/kit";

export interface OperationRow {
  id: string;
  database_id: string;
  type: string;
  status: string;
  started_at: Date;
  finished_at: Date | null;
  error: string;
  /** A failover's reason and members ("" for other types). */
  reason: string;
  from_member: string;
  to_member: string;
}

/** Starts an operation that completes when the agent reports `generation`; answers it. */
export async function startOperation(
  db: pg.ClientBase,
  databaseId: string,
  type: string,
  generation: bigint | string,
  failover?: { reason: string; from: string; to: string },
): Promise<OperationRow> {
  // A newer operation supersedes one still waiting: the agent converges to the latest spec only.
  // A backup's operation is not waiting for a spec: its backup settles it.
  await db.query(
    `UPDATE operations SET status = 'failed', finished_at = now(), error = 'superseded by a newer operation'
     WHERE database_id = $1 AND status = 'running' AND backup_id IS NULL`,
    [databaseId],
  );
  const { rows } = await db.query<OperationRow>(
    `INSERT INTO operations (id, database_id, type, status, generation, reason, from_member, to_member)
     VALUES ($1, $2, $3, 'running', $4, $5, $6, $7) RETURNING *`,
    [newId("op"), databaseId, type, String(generation), failover?.reason ?? "", failover?.from ?? "", failover?.to ?? ""],
  );
  return rows[0]!;
}

/** A switchover's operation now waits for `generation` (the failover's spec), naming both members. */
export async function retargetOperation(db: pg.ClientBase, id: string, generation: string, from: string, to: string): Promise<void> {
  await db.query("UPDATE operations SET generation = $2, from_member = $3, to_member = $4 WHERE id = $1", [id, generation, from, to]);
}

/** Ends one operation: failed with `error`. */
export async function failOperation(db: pg.ClientBase, id: string, error: string): Promise<void> {
  await db.query("UPDATE operations SET status = 'failed', finished_at = now(), error = $2 WHERE id = $1 AND status = 'running'", [
    id,
    error,
  ]);
}

/** The running failover operation of a database, if any. */
export async function runningFailover(db: pg.ClientBase, databaseId: string): Promise<OperationRow | undefined> {
  const { rows } = await db.query<OperationRow>(
    "SELECT * FROM operations WHERE database_id = $1 AND type = 'failover' AND status = 'running' ORDER BY started_at DESC LIMIT 1 FOR UPDATE",
    [databaseId],
  );
  return rows[0];
}

/** Ends the running operations a report for `generation` settles: succeeded, or failed with `error`. */
export async function finishOperations(db: pg.ClientBase, databaseId: string, generation: string, error = ""): Promise<void> {
  await db.query(
    `UPDATE operations SET status = $3, finished_at = now(), error = $4
     WHERE database_id = $1 AND status = 'running' AND generation <= $2 AND backup_id IS NULL`,
    [databaseId, generation, error ? "failed" : "succeeded", error],
  );
}

/** Starts the operation of backup `backupId`, settled by finishBackupOperation only. */
export async function startBackupOperation(db: pg.ClientBase, databaseId: string, backupId: string, generation: string): Promise<void> {
  await db.query(
    "INSERT INTO operations (id, database_id, type, status, generation, backup_id) VALUES ($1, $2, 'backup', 'running', $3, $4)",
    [newId("op"), databaseId, generation, backupId],
  );
}

/** The outcome of backup `backupId` on its operation: succeeded when `error` is "", failed with it otherwise. */
export async function finishBackupOperation(db: pg.ClientBase, backupId: string, error: string): Promise<void> {
  const status = error ? "failed" : "succeeded";
  await db.query("UPDATE operations SET status = $2, finished_at = now(), error = $3 WHERE backup_id = $1 AND status <> $2", [
    backupId,
    status,
    error,
  ]);
}

/** An operation that is over as it is recorded (news from the agent, e.g. WAL archiving failing or resuming). */
export async function recordOperation(
  db: pg.ClientBase,
  databaseId: string,
  type: string,
  generation: string,
  error: string,
): Promise<void> {
  await db.query(
    "INSERT INTO operations (id, database_id, type, status, generation, finished_at, error) VALUES ($1, $2, $3, $4, $5, now(), $6)",
    [newId("op"), databaseId, type, error ? "failed" : "succeeded", generation, error],
  );
}

/**
 * A lost standby retired (`standby_replaced`, on its primary), over as it is recorded: why, and the standby
 * retired (`from`); its replacement (`to`) is named once one is placed ({@link attachReplacement}).
 */
export async function recordStandbyReplaced(
  db: pg.ClientBase,
  primaryId: string,
  generation: string,
  reason: string,
  from: string,
): Promise<void> {
  await db.query(
    `INSERT INTO operations (id, database_id, type, status, generation, finished_at, reason, from_member)
     VALUES ($1, $2, 'standby_replaced', 'succeeded', $3, now(), $4, $5)`,
    [newId("op"), primaryId, generation, reason, from],
  );
}

/**
 * Standby `standbyId`, just placed on primary `primaryId`, is the replacement its oldest `standby_replaced`
 * still without one waited for: named as its `to`, `detail` appended to its reason. Answers whether one waited.
 */
export async function attachReplacement(db: pg.ClientBase, primaryId: string, standbyId: string, detail: string): Promise<boolean> {
  const res = await db.query(
    `UPDATE operations SET to_member = $2, reason = reason || $3
     WHERE id = (SELECT id FROM operations WHERE database_id = $1 AND type = 'standby_replaced' AND to_member = ''
                 ORDER BY started_at, id LIMIT 1 FOR UPDATE)`,
    [primaryId, standbyId, detail],
  );
  return res.rowCount !== 0;
}

/** `detail` appended to the reasons of the primary's `standby_replaced` of standbys `fromIds` still without a replacement. */
export async function notePendingReplacements(db: pg.ClientBase, primaryId: string, fromIds: string[], detail: string): Promise<void> {
  await db.query(
    `UPDATE operations SET reason = reason || $3
     WHERE database_id = $1 AND type = 'standby_replaced' AND to_member = '' AND from_member = ANY ($2)`,
    [primaryId, fromIds, detail],
  );
}

/**
 * A storage operation (`storage_full`, `storage_ok`), over as it is recorded,
 * with its mail to the organization's owners and admins pending (storage.ts).
 */
export async function recordStorageOperation(db: pg.ClientBase, databaseId: string, type: string, detail: string): Promise<void> {
  await db.query(
    `INSERT INTO operations (id, database_id, type, status, generation, finished_at, error, notify_pending, detail)
     SELECT $1, id, $2, 'succeeded', generation, now(), '', true, $3 FROM databases WHERE id = $4`,
    [newId("op"), type, detail, databaseId],
  );
}

/** A storage operation whose mail is still to be sent, with what the mail needs. */
export interface StorageNotice {
  id: string;
  type: string;
  database_id: string;
  organization_id: string;
  name: string;
  detail: string;
}

/** Up to `limit` storage operations whose mail is pending, oldest first. */
export async function claimStorageNotices(pool: pg.Pool, limit: number): Promise<StorageNotice[]> {
  const { rows } = await pool.query<StorageNotice>(
    `SELECT o.id, o.type, o.database_id, d.organization_id, d.name, o.detail FROM operations o JOIN databases d ON d.id = o.database_id
     WHERE o.notify_pending ORDER BY o.started_at, o.id LIMIT $1`,
    [limit],
  );
  return rows;
}

/** The operation's mail was handed to identity. */
export async function markNotified(pool: pg.Pool, id: string): Promise<void> {
  await pool.query("UPDATE operations SET notify_pending = false WHERE id = $1", [id]);
}

/** One page of a database's operations, newest first, and how many there are in all. */
export async function listOperations(
  pool: pg.Pool,
  databaseId: string,
  limit: number,
  offset: number,
): Promise<{ rows: OperationRow[]; total: number }> {
  const [{ rows }, count] = await Promise.all([
    pool.query<OperationRow>("SELECT * FROM operations WHERE database_id = $1 ORDER BY started_at DESC, id LIMIT $2 OFFSET $3", [
      databaseId,
      limit,
      offset,
    ]),
    pool.query<{ n: number }>("SELECT count(*)::int AS n FROM operations WHERE database_id = $1", [databaseId]),
  ]);
  return { rows, total: count.rows[0]!.n };
}
