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
}

/** Starts an operation that completes when the agent reports `generation`. */
export async function startOperation(db: pg.ClientBase, databaseId: string, type: string, generation: bigint | string): Promise<void> {
  // A newer operation supersedes one still waiting: the agent converges to the latest spec only.
  // A backup's operation is not waiting for a spec: its backup settles it.
  await db.query(
    `UPDATE operations SET status = 'failed', finished_at = now(), error = 'superseded by a newer operation'
     WHERE database_id = $1 AND status = 'running' AND backup_id IS NULL`,
    [databaseId],
  );
  await db.query("INSERT INTO operations (id, database_id, type, status, generation) VALUES ($1, $2, $3, 'running', $4)", [
    newId("op"),
    databaseId,
    type,
    String(generation),
  ]);
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
