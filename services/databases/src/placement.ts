import { outOfCapacity } from "@dbaas/kit";
import type pg from "pg";

export interface Placement {
  agentId: string;
  port: number;
}

/**
 * Chooses the live agent of `region` with the most free capacity that has the
 * server binaries of `version`, and the lowest free port in its range. The
 * agent row is locked for the rest of the caller's transaction, so concurrent
 * creates never take the same port or exceed capacity.
 */
export async function placeDatabase(
  db: pg.ClientBase,
  region: string,
  version: string,
  agentTimeoutSeconds: number,
): Promise<Placement> {
  // Lock the candidates first (in id order, so concurrent creates queue instead of deadlocking), then
  // count in a new statement: under READ COMMITTED its snapshot includes creates committed while we waited.
  // FOR NO KEY UPDATE, not FOR UPDATE: creates still exclude each other, but the foreign-key checks of
  // other transactions (FOR KEY SHARE on the agent, e.g. a delete updating its row twice) do not wait for
  // us — while this create's INSERT may wait for that delete (same name, case aside): a deadlock.
  await db.query(
    `SELECT id FROM agents WHERE $1 = ANY (regions) AND $2 = ANY (versions)
       AND last_seen_at > now() - make_interval(secs => $3) ORDER BY id FOR NO KEY UPDATE`,
    [region, version, agentTimeoutSeconds],
  );
  const { rows: agents } = await db.query<{ id: string; free: number; port_range_start: number; port_range_end: number }>(
    `SELECT a.id, a.port_range_start, a.port_range_end,
       a.capacity - (SELECT count(*) FROM databases d WHERE d.agent_id = a.id AND d.desired_state <> 'purged')::int AS free
     FROM agents a
     WHERE $1 = ANY (a.regions) AND $2 = ANY (a.versions) AND a.last_seen_at > now() - make_interval(secs => $3)
     ORDER BY free DESC, a.id`,
    [region, version, agentTimeoutSeconds],
  );
  for (const agent of agents) {
    if (agent.free <= 0) continue;
    const { rows } = await db.query<{ port: number }>(
      `SELECT p AS port FROM generate_series($2::int, $3::int) AS p
       WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.agent_id = $1 AND d.port = p AND d.desired_state <> 'purged')
       ORDER BY p LIMIT 1`,
      [agent.id, agent.port_range_start, agent.port_range_end],
    );
    if (rows[0]) return { agentId: agent.id, port: rows[0].port };
  }
  throw outOfCapacity(`no capacity for PostgreSQL ${version} in region ${region} right now; try again later or choose another region`);
}
