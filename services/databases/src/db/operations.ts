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
  await db.query(
    "UPDATE operations SET status = 'failed', finished_at = now(), error = 'superseded by a newer operation' WHERE database_id = $1 AND status = 'running'",
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
    "UPDATE operations SET status = $3, finished_at = now(), error = $4 WHERE database_id = $1 AND status = 'running' AND generation <= $2",
    [databaseId, generation, error ? "failed" : "succeeded", error],
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
