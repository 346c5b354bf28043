// SQL of what the service keeps about the inside of its databases: the agents' control URLs it reaches
// them at, and when roles were made through the API.
import type pg from "pg";

type Db = pg.Pool | pg.ClientBase;

/** The control URL of the agent running database `id` ("" for an agent that predates it). */
export async function controlUrlOf(db: Db, agentId: string): Promise<string> {
  const { rows } = await db.query<{ control_url: string }>("SELECT control_url FROM agents WHERE id = $1", [agentId]);
  return rows[0]?.control_url ?? "";
}

/** The running replicas of a primary, each with its agent's control URL. */
export async function runningReplicasOf(db: Db, primaryId: string): Promise<{ id: string; control_url: string }[]> {
  const { rows } = await db.query<{ id: string; control_url: string }>(
    `SELECT d.id, a.control_url FROM databases d JOIN agents a ON a.id = d.agent_id
     WHERE d.primary_id = $1 AND d.deleted_at IS NULL AND d.status = 'running' ORDER BY d.id`,
    [primaryId],
  );
  return rows;
}

/** When each of `names` was made through the API (absent when it was not). */
export async function roleCreationTimes(db: Db, databaseId: string, names: string[]): Promise<Map<string, Date>> {
  const { rows } = await db.query<{ name: string; created_at: Date }>(
    "SELECT name, created_at FROM database_roles WHERE database_id = $1 AND name = ANY($2)",
    [databaseId, names],
  );
  return new Map(rows.map((r) => [r.name, r.created_at]));
}

/** Notes that role `name` was made now through the API (a role of that name dropped before is forgotten). */
export async function recordRole(db: Db, databaseId: string, name: string): Promise<Date> {
  const { rows } = await db.query<{ created_at: Date }>(
    `INSERT INTO database_roles (database_id, name) VALUES ($1, $2)
     ON CONFLICT (database_id, name) DO UPDATE SET created_at = now() RETURNING created_at`,
    [databaseId, name],
  );
  return rows[0]!.created_at;
}

export async function forgetRole(db: Db, databaseId: string, name: string): Promise<void> {
  await db.query("DELETE FROM database_roles WHERE database_id = $1 AND name = $2", [databaseId, name]);
}

/** A restored database starts with its source's records of roles (its data holds the roles themselves). */
export async function copyRoles(db: Db, fromId: string, toId: string): Promise<void> {
  await db.query(
    `INSERT INTO database_roles (database_id, name, created_at)
     SELECT $2, name, created_at FROM database_roles WHERE database_id = $1 ON CONFLICT DO NOTHING`,
    [fromId, toId],
  );
}
