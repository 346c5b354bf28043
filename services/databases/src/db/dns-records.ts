// The `dns_records` table (what was sent to the DNS server) and the record each live database should have.
import type pg from "pg";

type Db = pg.Pool | pg.ClientBase;

/** A live database's (or replica's) record as its row and its agent say now. */
export interface WantedRecord {
  database_id: string;
  agent_id: string;
  /** The agent's public addresses (empty: an agent that never said). */
  addresses: string[];
  /** A database with standbys: its record's TTL is short, so a failover's move is seen soon. */
  ha: boolean;
}

/**
 * What database `id` should resolve to: its agent's public addresses; undefined when it is not live (deleted,
 * retired) or is a standby (never reachable by customers).
 */
export async function wantedRecord(db: Db, id: string): Promise<WantedRecord | undefined> {
  const { rows } = await db.query<WantedRecord>(
    `SELECT d.id AS database_id, d.agent_id, a.public_addresses AS addresses, d.ha_standbys > 0 AS ha
     FROM databases d JOIN agents a ON a.id = d.agent_id WHERE d.id = $1 AND d.deleted_at IS NULL AND NOT d.standby`,
    [id],
  );
  return rows[0];
}

/** Every live database's (and replica's; standbys have none) wanted record, by id; those of `agentId` only when given. */
export async function wantedRecords(db: Db, agentId?: string): Promise<WantedRecord[]> {
  const { rows } = await db.query<WantedRecord>(
    `SELECT d.id AS database_id, d.agent_id, a.public_addresses AS addresses, d.ha_standbys > 0 AS ha
     FROM databases d JOIN agents a ON a.id = d.agent_id
     WHERE d.deleted_at IS NULL AND NOT d.standby AND ($1::text IS NULL OR d.agent_id = $1) ORDER BY d.id`,
    [agentId ?? null],
  );
  return rows;
}

/** Notes that `name` is about to be sent `addresses` (before the update: a crash in between leaves a name the reconcile checks). */
export async function noteRecord(db: Db, name: string, databaseId: string, addresses: string[], ttl: number): Promise<void> {
  await db.query(
    `INSERT INTO dns_records (name, database_id, addresses, ttl) VALUES ($1, $2, $3, $4)
     ON CONFLICT (name) DO UPDATE SET database_id = $2, addresses = $3, ttl = $4, updated_at = now()`,
    [name, databaseId, addresses, ttl],
  );
}

export async function forgetRecord(db: Db, name: string): Promise<void> {
  await db.query("DELETE FROM dns_records WHERE name = $1", [name]);
}

/** Names published for databases that are no longer live: their records are to go. */
export async function staleRecords(db: Db): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT r.name FROM dns_records r
     WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = r.database_id AND d.deleted_at IS NULL) ORDER BY r.name`,
  );
  return rows.map((r) => r.name);
}

/** While database `id` waits for its record in a transitional status, why (its status unchanged). */
export async function noteWaitingForRecord(db: Db, id: string, reason: string): Promise<void> {
  await db.query("UPDATE databases SET status_reason = $2 WHERE id = $1 AND status <> 'running' AND deleted_at IS NULL", [id, reason]);
}
