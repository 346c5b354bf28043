// All SQL of a database's edge: its trusted sources and its pooler's settings (migration 0010).
import type pg from "pg";

type Db = pg.Pool | pg.ClientBase;

export interface TrustedSourceRow {
  id: string;
  database_id: string;
  cidr: string;
  description: string;
  expires_at: Date | null;
  created_at: Date;
}

const LIVE = "(expires_at IS NULL OR expires_at > $2)";

/** Whether `err` is the unique violation of a CIDR listed twice on one database. */
export function cidrTaken(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === "23505" && e.constraint === "trusted_sources_database_id_cidr_key";
}

/** One page of the database's unexpired trusted sources, oldest first, and how many there are. */
export async function listTrustedSources(
  db: Db,
  databaseId: string,
  now: Date,
  limit: number,
  offset: number,
): Promise<{ rows: TrustedSourceRow[]; total: number }> {
  const [{ rows }, count] = await Promise.all([
    db.query<TrustedSourceRow>(
      `SELECT id, database_id, cidr::text AS cidr, description, expires_at, created_at FROM trusted_sources
       WHERE database_id = $1 AND ${LIVE} ORDER BY created_at, id LIMIT $3 OFFSET $4`,
      [databaseId, now, limit, offset],
    ),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM trusted_sources WHERE database_id = $1 AND ${LIVE}`, [databaseId, now]),
  ]);
  return { rows, total: count.rows[0]!.n };
}

/**
 * Locks the database's list for the caller's transaction (concurrent adds cannot both pass the
 * limit), deleting its expired entries, and answers how many remain.
 */
export async function lockTrustedSources(db: pg.ClientBase, databaseId: string, now: Date): Promise<number> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext('trusted-sources:' || $1))", [databaseId]);
  await db.query("DELETE FROM trusted_sources WHERE database_id = $1 AND expires_at <= $2", [databaseId, now]);
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM trusted_sources WHERE database_id = $1", [databaseId]);
  return rows[0]!.n;
}

export async function insertTrustedSource(
  db: pg.ClientBase,
  t: { id: string; databaseId: string; cidr: string; description: string; expiresAt: Date | null; now: Date },
): Promise<TrustedSourceRow> {
  const { rows } = await db.query<TrustedSourceRow>(
    `INSERT INTO trusted_sources (id, database_id, cidr, description, expires_at, created_at) VALUES ($1, $2, $3::cidr, $4, $5, $6)
     RETURNING id, database_id, cidr::text AS cidr, description, expires_at, created_at`,
    [t.id, t.databaseId, t.cidr, t.description, t.expiresAt, t.now],
  );
  return rows[0]!;
}

/** Deletes entry `id` of the database; whether it existed (an expired one counts as gone). */
export async function deleteTrustedSource(db: pg.ClientBase, databaseId: string, id: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM trusted_sources WHERE database_id = $1 AND id = $3 AND ${LIVE}`, [databaseId, now, id]);
  return rowCount !== 0;
}

/** The unexpired trusted sources of each of `databaseIds`, as the agents' specs carry them. */
export async function trustedSourcesOf(db: Db, databaseIds: readonly string[], now: Date): Promise<Map<string, TrustedSourceRow[]>> {
  const out = new Map<string, TrustedSourceRow[]>();
  if (databaseIds.length === 0) return out;
  const { rows } = await db.query<TrustedSourceRow>(
    `SELECT id, database_id, cidr::text AS cidr, description, expires_at, created_at FROM trusted_sources
     WHERE database_id = ANY ($1::text[]) AND ${LIVE} ORDER BY database_id, created_at, id`,
    [databaseIds, now],
  );
  for (const r of rows) {
    const list = out.get(r.database_id) ?? [];
    list.push(r);
    out.set(r.database_id, list);
  }
  return out;
}

/**
 * Deletes every entry expired by `now`, answering the agents that run the databases concerned
 * (primaries and their replicas) so their next spec no longer lists them. The agents stopped
 * admitting them at `expires_at` already: this only tidies the list.
 */
export async function deleteExpiredTrustedSources(db: pg.ClientBase, now: Date): Promise<string[]> {
  const { rows } = await db.query<{ agent_id: string }>(
    `WITH gone AS (DELETE FROM trusted_sources WHERE expires_at <= $1 RETURNING database_id)
     SELECT DISTINCT d.agent_id FROM databases d
     WHERE d.deleted_at IS NULL AND (d.id IN (SELECT database_id FROM gone) OR d.primary_id IN (SELECT database_id FROM gone))`,
    [now],
  );
  return rows.map((r) => r.agent_id);
}

export interface PoolerRow {
  enabled: boolean;
  mode: "transaction" | "session";
  /** NULL: the tier's default. */
  pool_size: number | null;
}

export const DEFAULT_POOLER: PoolerRow = { enabled: true, mode: "transaction", pool_size: null };

/** The pooler settings of each of `databaseIds` that has some (others have the defaults). */
export async function poolersOf(db: Db, databaseIds: readonly string[]): Promise<Map<string, PoolerRow>> {
  const out = new Map<string, PoolerRow>();
  if (databaseIds.length === 0) return out;
  const { rows } = await db.query<PoolerRow & { database_id: string }>(
    "SELECT database_id, enabled, mode, pool_size FROM poolers WHERE database_id = ANY ($1::text[])",
    [databaseIds],
  );
  for (const r of rows) out.set(r.database_id, { enabled: r.enabled, mode: r.mode, pool_size: r.pool_size });
  return out;
}

export async function upsertPooler(db: pg.ClientBase, databaseId: string, p: PoolerRow): Promise<void> {
  await db.query(
    `INSERT INTO poolers (database_id, enabled, mode, pool_size) VALUES ($1, $2, $3, $4)
     ON CONFLICT (database_id) DO UPDATE SET enabled = $2, mode = $3, pool_size = $4, updated_at = now()`,
    [databaseId, p.enabled, p.mode, p.pool_size],
  );
}

export interface AgentPooling {
  pooler_port_offset: number;
  pooler_unavailable_reason: string;
}

/** What the agent said of its poolers when it last registered. */
export async function agentPooling(db: Db, agentId: string): Promise<AgentPooling> {
  const { rows } = await db.query<AgentPooling>("SELECT pooler_port_offset, pooler_unavailable_reason FROM agents WHERE id = $1", [
    agentId,
  ]);
  return rows[0] ?? { pooler_port_offset: 0, pooler_unavailable_reason: "its host is unknown" };
}

export async function setAgentPooling(db: Db, agentId: string, p: AgentPooling): Promise<void> {
  await db.query("UPDATE agents SET pooler_port_offset = $2, pooler_unavailable_reason = $3 WHERE id = $1", [
    agentId,
    p.pooler_port_offset,
    p.pooler_unavailable_reason,
  ]);
}
