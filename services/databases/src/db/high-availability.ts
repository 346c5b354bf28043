// All SQL of high availability: standbys (rows of `databases` with `standby`), leases, discarded old primaries,
// the places a standby may go, and what the failover supervisor looks at.
import type pg from "pg";
import type { DatabaseRow } from "./databases.ts";

type Db = pg.Pool | pg.ClientBase;

/** The primary's live standbys, oldest first, locked FOR UPDATE. */
export async function lockStandbys(db: pg.ClientBase, primaryId: string): Promise<DatabaseRow[]> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE primary_id = $1 AND standby AND deleted_at IS NULL ORDER BY created_at, id FOR UPDATE",
    [primaryId],
  );
  return rows;
}

/** A live primary (not itself a standby or replica) and its live standbys, all locked; undefined when it is gone. */
export async function lockPrimaryAndStandbys(
  db: pg.ClientBase,
  primaryId: string,
): Promise<{ p: DatabaseRow; standbys: DatabaseRow[] } | undefined> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE id = $1 AND deleted_at IS NULL AND primary_id IS NULL FOR UPDATE",
    [primaryId],
  );
  const p = rows[0];
  return p && { p, standbys: await lockStandbys(db, p.id) };
}

/** The primary's live standbys, oldest first, unlocked. */
export async function liveStandbys(db: Db, primaryId: string): Promise<DatabaseRow[]> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE primary_id = $1 AND standby AND deleted_at IS NULL ORDER BY created_at, id",
    [primaryId],
  );
  return rows;
}

/** A primary's wanted standbys and mode, stored. */
export async function setHaConfig(db: pg.ClientBase, id: string, standbys: number, synchronous: boolean): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    "UPDATE databases SET ha_standbys = $2, ha_synchronous = $3, updated_at = now() WHERE id = $1 RETURNING *",
    [id, standbys, synchronous],
  );
  return rows[0]!;
}

/** An agent that may take a standby: live, of the region and version, with capacity left. */
export interface StandbyHost {
  id: string;
  free: number;
  port_range_start: number;
  port_range_end: number;
  /** Ports it holds (instances not purged, and old primaries still to be discarded). */
  held: number[];
}

/**
 * The live agents of `region` with the server binaries of `version` and
 * capacity left, most free first, each with the ports it holds. Locks them
 * (FOR NO KEY UPDATE, in id order, as placement does) so concurrent
 * placements never take one port twice.
 */
export async function lockStandbyHosts(
  db: pg.ClientBase,
  c: { region: string; version: string; timeoutSeconds: number; now: Date },
): Promise<StandbyHost[]> {
  await db.query(
    `SELECT id FROM agents WHERE $1 = ANY (regions) AND $2 = ANY (versions)
       AND last_seen_at > $4::timestamptz - make_interval(secs => $3) ORDER BY id FOR NO KEY UPDATE`,
    [c.region, c.version, c.timeoutSeconds, c.now],
  );
  const { rows } = await db.query<StandbyHost>(
    `SELECT a.id, a.port_range_start, a.port_range_end,
       a.capacity - (SELECT count(*) FROM databases d WHERE d.agent_id = a.id AND d.desired_state <> 'purged')::int
         - (SELECT count(*) FROM ha_discards x WHERE x.agent_id = a.id)::int AS free,
       ARRAY(SELECT d.port FROM databases d WHERE d.agent_id = a.id AND d.desired_state <> 'purged'
             UNION SELECT x.port FROM ha_discards x WHERE x.agent_id = a.id) AS held
     FROM agents a
     WHERE $1 = ANY (a.regions) AND $2 = ANY (a.versions) AND a.last_seen_at > $4::timestamptz - make_interval(secs => $3)
     ORDER BY free DESC, a.id`,
    [c.region, c.version, c.timeoutSeconds, c.now],
  );
  return rows;
}

/** Whether `port` is free on `host` for a new instance. */
export function portFreeOn(host: StandbyHost, port: number): boolean {
  return host.free > 0 && port >= host.port_range_start && port <= host.port_range_end && !host.held.includes(port);
}

/** Old primaries' instances agent `agentId` is to remove. */
export async function discardsOf(db: Db, agentId: string): Promise<string[]> {
  const { rows } = await db.query<{ instance_id: string }>("SELECT instance_id FROM ha_discards WHERE agent_id = $1 ORDER BY instance_id", [
    agentId,
  ]);
  return rows.map((r) => r.instance_id);
}

export async function insertDiscard(db: pg.ClientBase, d: { agentId: string; instanceId: string; port: number; operationId: string }) {
  await db.query(
    `INSERT INTO ha_discards (agent_id, instance_id, port, operation_id) VALUES ($1, $2, $3, $4)
     ON CONFLICT (agent_id, instance_id) DO UPDATE SET port = $3, operation_id = $4`,
    [d.agentId, d.instanceId, d.port, d.operationId],
  );
}

/**
 * The agent removed an old primary's instance: the discard is done, and its
 * failover's operation says so. Answers whether there was one.
 */
export async function confirmDiscard(db: pg.ClientBase, agentId: string, instanceId: string): Promise<boolean> {
  const { rows } = await db.query<{ operation_id: string }>(
    "DELETE FROM ha_discards WHERE agent_id = $1 AND instance_id = $2 RETURNING operation_id",
    [agentId, instanceId],
  );
  if (!rows[0]) return false;
  await db.query(`UPDATE operations SET reason = reason || $2 WHERE id = $1`, [
    rows[0].operation_id,
    `; the old primary's data on ${agentId} (with whatever it wrote that its standby had not received) was discarded at ${new Date().toISOString()}`,
  ]);
  return true;
}

/**
 * Renews agent `agentId`'s leases on its highly available primaries that may
 * hold one (meant to run, not failed, not fenced by a switchover) until
 * `expiresAt`: a missing lease is made, one held by the agent extended; a
 * lease another agent holds (after a failover) is never taken. Answers the
 * primaries whose lease it holds now.
 */
export async function renewLeases(db: Db, agentId: string, now: Date, expiresAt: Date): Promise<string[]> {
  const { rows } = await db.query<{ database_id: string }>(
    `INSERT INTO ha_leases (database_id, agent_id, expires_at, renewed_at)
     SELECT d.id, $1, $3, $2 FROM databases d
     WHERE d.agent_id = $1 AND d.primary_id IS NULL AND d.deleted_at IS NULL AND d.ha_standbys > 0
       AND d.desired_state = 'running' AND d.status <> 'failed' AND d.switchover_fenced_at IS NULL
     ON CONFLICT (database_id) DO UPDATE SET expires_at = EXCLUDED.expires_at, renewed_at = EXCLUDED.renewed_at
       WHERE ha_leases.agent_id = EXCLUDED.agent_id
     RETURNING database_id`,
    [agentId, now, expiresAt],
  );
  return rows.map((r) => r.database_id).sort();
}

export async function dropLease(db: pg.ClientBase, databaseId: string): Promise<void> {
  await db.query("DELETE FROM ha_leases WHERE database_id = $1", [databaseId]);
}

export interface Lease {
  agent_id: string;
  expires_at: Date;
}

export async function lockLease(db: pg.ClientBase, databaseId: string): Promise<Lease | undefined> {
  const { rows } = await db.query<Lease>("SELECT agent_id, expires_at FROM ha_leases WHERE database_id = $1 FOR UPDATE", [databaseId]);
  return rows[0];
}

/** The lease passes to the promoted standby's agent, valid for a lease from now. */
export async function moveLease(db: pg.ClientBase, databaseId: string, agentId: string, now: Date, expiresAt: Date): Promise<void> {
  await db.query(
    `INSERT INTO ha_leases (database_id, agent_id, expires_at, renewed_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (database_id) DO UPDATE SET agent_id = $2, expires_at = $3, renewed_at = $4`,
    [databaseId, agentId, expiresAt, now],
  );
}

/** A highly available primary as the supervisor sees it: the row, its lease, its agent's last report. */
export type SupervisedPrimary = DatabaseRow & {
  lease_agent_id: string | null;
  lease_expires_at: Date | null;
  agent_last_seen_at: Date;
};

/** Live primaries with standbys wanted or kept, or a switchover under way. */
export async function supervisedPrimaries(db: Db): Promise<SupervisedPrimary[]> {
  const { rows } = await db.query<SupervisedPrimary>(
    `SELECT d.*, l.agent_id AS lease_agent_id, l.expires_at AS lease_expires_at, a.last_seen_at AS agent_last_seen_at
     FROM databases d JOIN agents a ON a.id = d.agent_id LEFT JOIN ha_leases l ON l.database_id = d.id
     WHERE d.deleted_at IS NULL AND d.primary_id IS NULL
       AND (d.ha_standbys > 0 OR d.switchover_to IS NOT NULL
            OR EXISTS (SELECT 1 FROM databases s WHERE s.primary_id = d.id AND s.standby AND s.deleted_at IS NULL))
     ORDER BY d.id`,
  );
  return rows;
}

/** A standby and when its agent was last heard from. */
export type SupervisedStandby = DatabaseRow & { agent_last_seen_at: Date };

export async function standbysWithAgents(db: Db, primaryId: string): Promise<SupervisedStandby[]> {
  const { rows } = await db.query<SupervisedStandby>(
    `SELECT s.*, a.last_seen_at AS agent_last_seen_at FROM databases s JOIN agents a ON a.id = s.agent_id
     WHERE s.primary_id = $1 AND s.standby AND s.deleted_at IS NULL ORDER BY s.created_at, s.id`,
    [primaryId],
  );
  return rows;
}

/** The agents' last reports, by id. */
export async function agentsLastSeen(db: Db, ids: string[]): Promise<Map<string, Date>> {
  const { rows } = await db.query<{ id: string; last_seen_at: Date }>("SELECT id, last_seen_at FROM agents WHERE id = ANY ($1)", [ids]);
  return new Map(rows.map((r) => [r.id, r.last_seen_at]));
}

/** What an observation says of an instance's WAL and fencing, with when it arrived. */
export async function recordWal(db: pg.ClientBase, id: string, walPosition: bigint, fenced: boolean, now: Date): Promise<void> {
  await db.query(
    `UPDATE databases SET wal_position = $2, wal_position_at = CASE WHEN $2::bigint > 0 THEN $4::timestamptz END, fenced = $3
     WHERE id = $1`,
    [id, String(walPosition), fenced, now],
  );
}

/** A switchover begins (to standby `to`) or ends (null). */
export async function setSwitchover(db: pg.ClientBase, id: string, to: string | null, now: Date | null): Promise<void> {
  await db.query(
    "UPDATE databases SET switchover_to = $2, switchover_started_at = $3, switchover_fenced_at = NULL, updated_at = now() WHERE id = $1",
    [id, to, now],
  );
}

/** The switchover's standby has nearly all the WAL: the primary is to be fenced from `now`. */
export async function fenceForSwitchover(db: pg.ClientBase, id: string, now: Date): Promise<void> {
  await db.query("UPDATE databases SET switchover_fenced_at = $2, updated_at = now() WHERE id = $1 AND switchover_to IS NOT NULL", [
    id,
    now,
  ]);
}

/**
 * The failover in the primary's row: its instance is now the standby's
 * (adopted on the standby's agent, same port), its member id the standby's,
 * a new generation; the replication endpoint unknown until the new server
 * reports it; the last failover recorded.
 */
export async function moveToStandby(
  db: pg.ClientBase,
  primaryId: string,
  standby: Pick<DatabaseRow, "id" | "agent_id">,
  f: { at: Date; reason: string; from: string },
): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    `UPDATE databases SET agent_id = $2, adopt_instance_id = $3, node_id = $3, replication_address = '', replication_port = 0,
       wal_position = 0, wal_position_at = NULL, fenced = false, switchover_to = NULL, switchover_started_at = NULL,
       switchover_fenced_at = NULL,
       last_failover_at = $4, last_failover_reason = $5, last_failover_from = $6, last_failover_to = $3,
       generation = generation + 1, trace_context = '{}', trace_context_at = now(), updated_at = now()
     WHERE id = $1 RETURNING *`,
    [primaryId, standby.agent_id, standby.id, f.at, f.reason, f.from],
  );
  return rows[0]!;
}
