// All SQL of the `databases` table: its rows, loads, locks and the changes the lifecycle makes.
import type pg from "pg";
import { newId, notFound, traceContext } from "@dbaas/kit";
import type { DesiredState, RecordedStatus } from "../statuses.ts";
import { insertStatusEvent } from "./outbox.ts";

type Db = pg.Pool | pg.ClientBase;

export interface DatabaseRow {
  id: string;
  organization_id: string;
  name: string;
  region: string;
  tier: string;
  version: string;
  status: RecordedStatus;
  status_reason: string;
  agent_id: string;
  port: number;
  desired_state: DesiredState;
  generation: string;
  observed_generation: string;
  scram_verifier: string;
  credentials_generation: string;
  applied_credentials_generation: string;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  purge_after: Date | null;
  /** Set on a database created by a restore to a point in time: the source database and the instant. */
  restored_from_id: string | null;
  restore_time: Date | null;
  /** Set on a read replica ("rep-…"): its primary. Every query about databases excludes these rows. */
  primary_id: string | null;
  /** At its tier's storage: the agent keeps it read-only (storage.ts). */
  storage_full: boolean;
  /** A replica's seed: the primary's backup requested for it, how many were, and whether its spec carries it. */
  seed_backup_id: string | null;
  seed_attempts: number;
  seed_ready: boolean;
  /** Where the running instance listens for replication, as its agent last reported it. */
  replication_address: string;
  replication_port: number;
  /** A replica's latest lag, as its primary's agent measured it (0 until then). */
  lag_bytes: string;
  lag_sampled_at: Date | null;
  /** A promoted replica's database (or a database after a failover): the replica or standby whose instance it takes over. */
  adopt_instance_id: string | null;
  /** A standby of a highly available database ("node-…", primary_id set): never published, billed as compute. */
  standby: boolean;
  /** A primary's wanted standbys (0-2) and whether it commits synchronously. */
  ha_standbys: number;
  ha_synchronous: boolean;
  /** A highly available primary's member id: the server it runs on now (null before it had standbys). */
  node_id: string | null;
  /** The instance's WAL position (bytes) as its agent last reported it, and when that report arrived. */
  wal_position: string;
  wal_position_at: Date | null;
  /** Whether the agent reports the primary fenced (no client sessions). */
  fenced: boolean;
  /** A planned switchover under way: the standby it hands over to, since when. */
  switchover_to: string | null;
  switchover_started_at: Date | null;
  /** Since when the switchover fences the primary (null while the standby is still catching up). */
  switchover_fenced_at: Date | null;
  /** The last failover (null / "" before the first). */
  last_failover_at: Date | null;
  last_failover_reason: string;
  last_failover_from: string;
  last_failover_to: string;
}

/**
 * Every column of DatabaseRow, named: GET /v1/databases/{id} is the API's
 * hottest read, so it is a named statement (parsed and planned once per
 * connection), and a prepared `SELECT *` would fail on every open connection
 * ("cached plan must not change result type") once a migration adds a column.
 */
const DATABASE_COLUMNS = [
  "id",
  "organization_id",
  "name",
  "region",
  "tier",
  "version",
  "status",
  "status_reason",
  "agent_id",
  "port",
  "desired_state",
  "generation",
  "observed_generation",
  "scram_verifier",
  "credentials_generation",
  "applied_credentials_generation",
  "created_at",
  "updated_at",
  "deleted_at",
  "purge_after",
  "restored_from_id",
  "restore_time",
  "primary_id",
  "seed_backup_id",
  "seed_attempts",
  "seed_ready",
  "replication_address",
  "replication_port",
  "lag_bytes",
  "lag_sampled_at",
  "adopt_instance_id",
  "storage_full",
  "standby",
  "ha_standbys",
  "ha_synchronous",
  "node_id",
  "wal_position",
  "wal_position_at",
  "fenced",
  "switchover_to",
  "switchover_started_at",
  "switchover_fenced_at",
  "last_failover_at",
  "last_failover_reason",
  "last_failover_from",
  "last_failover_to",
] as const satisfies readonly (keyof DatabaseRow)[];
// Fails to compile when DatabaseRow gains a field the list above lacks.
type OnlyNever<T extends never> = T;
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check, never used as a type.
type AllColumnsNamed = OnlyNever<Exclude<keyof DatabaseRow, (typeof DATABASE_COLUMNS)[number]>>;

/**
 * The live databases of a batch of (id, organization) keys, each row tagged
 * with the 0-based position of the key it matched. The join matches both
 * columns, so a row only ever answers the key of its own organization.
 * The keys travel as two arrays, so the text never changes and the statement
 * stays prepared. The `OFFSET 0` fence hides the arrays' length from the
 * planner: were it seen, every custom plan would look cheaper than the generic
 * one and PostgreSQL would plan the statement anew on each execution.
 */
const GET_DATABASES =
  `SELECT (k.i - 1)::int AS key_index, ${DATABASE_COLUMNS.map((c) => `d.${c}`).join(", ")} ` +
  "FROM (SELECT $1::text[] AS ids, $2::text[] AS organization_ids OFFSET 0) p " +
  "CROSS JOIN LATERAL unnest(p.ids, p.organization_ids) WITH ORDINALITY AS k(id, organization_id, i) " +
  "JOIN databases d ON d.id = k.id AND d.organization_id = k.organization_id WHERE d.deleted_at IS NULL AND d.primary_id IS NULL";

export interface DatabaseKey {
  id: string;
  organizationId: string;
}

/** The live database of each key (undefined where there is none), in one query. */
export async function loadLiveDatabases(pool: pg.Pool, keys: DatabaseKey[]): Promise<(DatabaseRow | undefined)[]> {
  const { rows } = await pool.query<DatabaseRow & { key_index: number }>({
    name: "get-databases",
    text: GET_DATABASES,
    values: [keys.map((k) => k.id), keys.map((k) => k.organizationId)],
  });
  const found = new Array<DatabaseRow | undefined>(keys.length);
  for (const row of rows) found[row.key_index] = row;
  return found;
}

/** Whether `err` is the unique violation of a live name taken twice in one organization (case aside). */
export function nameTaken(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === "23505" && e.constraint === "databases_live_name";
}

/** The organization's live database `id`, locked FOR UPDATE for the caller's transaction; else NOT_FOUND. */
export async function lockOwned(db: pg.ClientBase, orgId: string, id: string): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL AND primary_id IS NULL FOR UPDATE",
    [id, orgId],
  );
  if (!rows[0]) throw notFound("database");
  return rows[0];
}

/** The organization's live database `id`, unlocked; undefined when there is none. */
export async function findOwned(db: Db, orgId: string, id: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL AND primary_id IS NULL",
    [id, orgId],
  );
  return rows[0];
}

/** Whether the organization has a live database `id`. */
export async function ownsLive(db: Db, orgId: string, id: string): Promise<boolean> {
  const owned = await db.query(
    "SELECT 1 FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL AND primary_id IS NULL",
    [id, orgId],
  );
  return owned.rowCount !== 0;
}

export interface ListFilter {
  organizationId: string;
  /** "" for any. */
  status: string;
  /** "" for any. */
  region: string;
}

/** One page of the organization's live databases, newest first, and how many there are in all. */
export async function listLive(
  pool: pg.Pool,
  f: ListFilter,
  limit: number,
  offset: number,
): Promise<{ rows: DatabaseRow[]; total: number }> {
  const where =
    "organization_id = $1 AND deleted_at IS NULL AND primary_id IS NULL AND ($2 = '' OR status = $2) AND ($3 = '' OR region = $3)";
  const params = [f.organizationId, f.status, f.region];
  const [{ rows }, count] = await Promise.all([
    pool.query<DatabaseRow>(`SELECT * FROM databases WHERE ${where} ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`, [
      ...params,
      limit,
      offset,
    ]),
    pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM databases WHERE ${where}`, params),
  ]);
  return { rows, total: count.rows[0]!.n };
}

export interface NewDatabase {
  id: string;
  organizationId: string;
  name: string;
  region: string;
  tier: string;
  version: string;
  status: RecordedStatus;
  desired: DesiredState;
  agentId: string;
  port: number;
  scramVerifier: string;
  /** A restore to a point in time: the instance starts from this database's backups, up to this instant. */
  restoredFrom?: { databaseId: string; restoreTime: Date };
  /** A read replica of this database. */
  primaryId?: string;
  /** A promoted replica's database: takes over that replica's instance. */
  adoptInstanceId?: string;
  /** A standby of the primary `primaryId` (high availability). */
  standby?: boolean;
  /** A primary's high availability: its standbys wanted, synchronous commits, its member id. */
  ha?: { standbys: number; synchronous: boolean; nodeId: string };
}

export async function insertDatabase(db: pg.ClientBase, d: NewDatabase): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    `INSERT INTO databases (id, organization_id, name, region, tier, version, status, agent_id, port,
       desired_state, scram_verifier, restored_from_id, restore_time, trace_context, primary_id, adopt_instance_id,
       standby, ha_standbys, ha_synchronous, node_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) RETURNING *`,
    [
      d.id,
      d.organizationId,
      d.name,
      d.region,
      d.tier,
      d.version,
      d.status,
      d.agentId,
      d.port,
      d.desired,
      d.scramVerifier,
      d.restoredFrom?.databaseId ?? null,
      d.restoredFrom?.restoreTime ?? null,
      traceContext(),
      d.primaryId ?? null,
      d.adoptInstanceId ?? null,
      d.standby ?? false,
      d.ha?.standbys ?? 0,
      d.ha?.synchronous ?? false,
      d.ha?.nodeId ?? (d.primaryId ? null : newId("node")),
    ],
  );
  return rows[0]!;
}

/*
 * Every change of what an agent is to do stores the trace context of the
 * request making it (traceContext(): empty in a background job), which the
 * agent's work on the change continues.
 */

/** A new spec for the agent: the desired state and tier given (others kept), the generation bumped. */
export async function updateSpec(db: pg.ClientBase, id: string, change: { desired?: DesiredState; tier?: string }): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    `UPDATE databases SET desired_state = COALESCE($2, desired_state), tier = COALESCE($3, tier),
       generation = generation + 1, trace_context = $4, trace_context_at = now(), updated_at = now() WHERE id = $1 RETURNING *`,
    [id, change.desired ?? null, change.tier ?? null, traceContext()],
  );
  return rows[0]!;
}

export async function rename(db: pg.ClientBase, id: string, name: string): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>("UPDATE databases SET name = $2, updated_at = now() WHERE id = $1 RETURNING *", [id, name]);
  return rows[0]!;
}

/** Deleted as of `now`: hidden from the organization, its data kept for `retentionSeconds`, then purged. */
export async function markDeleted(
  db: pg.ClientBase,
  id: string,
  desired: DesiredState,
  now: Date,
  retentionSeconds: number,
): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    `UPDATE databases SET desired_state = $2, deleted_at = $3::timestamptz,
       purge_after = $3::timestamptz + make_interval(secs => $4), generation = generation + 1, trace_context = $5, trace_context_at = now(), updated_at = now()
     WHERE id = $1 RETURNING *`,
    [id, desired, now, retentionSeconds, traceContext()],
  );
  return rows[0]!;
}

/** The deleted database `id` still within its retention window, locked FOR UPDATE; undefined when there is none. */
export async function lockDeleted(db: pg.ClientBase, id: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>("SELECT * FROM databases WHERE id = $1 AND desired_state = 'deleted' FOR UPDATE", [id]);
  return rows[0];
}

/** Live again, converging to `desired`. */
export async function undelete(db: pg.ClientBase, id: string, desired: DesiredState): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    `UPDATE databases SET desired_state = $2, deleted_at = NULL, purge_after = NULL,
       generation = generation + 1, trace_context = $3, trace_context_at = now(), updated_at = now() WHERE id = $1 RETURNING *`,
    [id, desired, traceContext()],
  );
  return rows[0]!;
}

/**
 * Records a status change: the row, and an outbox event for billing, in the
 * caller's transaction — so billing sees exactly the changes that committed.
 */
export async function setStatus(
  db: pg.ClientBase,
  row: Pick<DatabaseRow, "id" | "organization_id" | "tier" | "primary_id" | "standby">,
  status: RecordedStatus,
  reason = "",
): Promise<void> {
  const { rows } = await db.query<{ updated_at: Date }>(
    "UPDATE databases SET status = $2, status_reason = $3, updated_at = now() WHERE id = $1 RETURNING updated_at",
    [row.id, status, reason],
  );
  await insertStatusEvent(db, {
    organizationId: row.organization_id,
    databaseId: row.id,
    tier: row.tier,
    status,
    occurredAt: rows[0]!.updated_at,
    // A standby is billed as compute, like the primary it may become (docs/product.md, High availability).
    kind: row.primary_id === null || row.standby ? "database" : "replica",
  });
}

/** A new password's verifier for the agent, under a new credentials generation. */
export async function setVerifier(db: pg.ClientBase, id: string, verifier: string): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    `UPDATE databases SET scram_verifier = $2, credentials_generation = credentials_generation + 1, trace_context = $3, trace_context_at = now(), updated_at = now()
     WHERE id = $1 RETURNING *`,
    [id, verifier, traceContext()],
  );
  return rows[0]!;
}

/**
 * The primary's new verifier for its replicas, under a new credentials
 * generation each: their agents wait until it has arrived by replication and
 * end the sessions opened with the old password. Returns their agents.
 */
export async function setReplicaVerifiers(db: pg.ClientBase, primaryId: string, verifier: string): Promise<string[]> {
  const { rows } = await db.query<{ agent_id: string }>(
    `UPDATE databases SET scram_verifier = $2, credentials_generation = credentials_generation + 1, updated_at = now()
     WHERE primary_id = $1 AND deleted_at IS NULL RETURNING agent_id`,
    [primaryId, verifier],
  );
  return [...new Set(rows.map((r) => r.agent_id))];
}

/** The credentials generation the agent last confirmed for database `id`. */
export async function appliedCredentials(db: Db, id: string): Promise<bigint> {
  const { rows } = await db.query<{ applied: string }>("SELECT applied_credentials_generation AS applied FROM databases WHERE id = $1", [
    id,
  ]);
  return BigInt(rows[0]!.applied);
}

/** Database `id` if agent `agentId` hosts it, locked FOR UPDATE to apply that agent's report. */
export async function lockHosted(db: pg.ClientBase, agentId: string, id: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>("SELECT * FROM databases WHERE id = $1 AND agent_id = $2 FOR UPDATE", [id, agentId]);
  return rows[0];
}

/** What an agent reported having applied; a report never moves either generation back. */
export async function recordObserved(db: pg.ClientBase, id: string, credentials: bigint, generation: bigint): Promise<void> {
  await db.query(
    `UPDATE databases SET applied_credentials_generation = GREATEST(applied_credentials_generation, $2),
       observed_generation = GREATEST(observed_generation, $3) WHERE id = $1`,
    [id, String(credentials), String(generation)],
  );
}

/** An instance as its agent is to run it: the row, and what its spec carries beside it. */
export type AssignedRow = DatabaseRow & {
  backup_ids: string[];
  spec_trace_context: Record<string, string>;
  /** Of a primary: its replicas that exist (each keeps a slot on it). */
  replica_ids: string[];
  /** Of a replica: its primary's, as the spec's replica_of carries them (the version is the row's). */
  primary_address: string | null;
  primary_port: number | null;
  primary_ca_pem: string | null;
  /** Of a primary: its standbys that run (stream) on an agent heard from lately: the synchronous ones in synchronous mode. */
  running_standby_ids: string[];
  /** The configuration overrides it runs (a replica: its primary's) and their generation. */
  config_parameters: Record<string, string>;
  config_generation: string;
  /** Of a standby: the other live members of its primary (replicas, standbys) and where each last reported its WAL (0: not yet). */
  sibling_positions: { id: string; position: string }[];
};

/**
 * The desired state of everything agent `agentId` hosts, with the backups it
 * is to take now (the running ones of a database meant to run), a primary's
 * replicas and a replica's primary; purged instances whose purge it confirmed
 * are history, and a promoted replica's instance belongs to its new database.
 */
export async function assignedTo(db: Db, agentId: string, standbysLiveSince: Date = new Date(0)): Promise<AssignedRow[]> {
  const { rows } = await db.query<AssignedRow>(
    `SELECT d.*, ARRAY(SELECT b.id FROM backups b WHERE b.database_id = d.id AND b.status = 'running' AND d.desired_state = 'running'
                       ORDER BY b.id) AS backup_ids,
       COALESCE((SELECT b.trace_context FROM backups b WHERE b.database_id = d.id AND b.status = 'running'
                   AND d.desired_state = 'running' AND b.created_at > d.trace_context_at),
                d.trace_context) AS spec_trace_context,
       ARRAY(SELECT r.id FROM databases r WHERE r.primary_id = d.id AND r.deleted_at IS NULL ORDER BY r.id) AS replica_ids,
       ARRAY(SELECT s.id FROM databases s JOIN agents sa ON sa.id = s.agent_id
             WHERE s.primary_id = d.id AND s.standby AND s.deleted_at IS NULL AND s.status = 'running' AND sa.last_seen_at > $2
             ORDER BY s.id) AS running_standby_ids,
       p.replication_address AS primary_address, p.replication_port AS primary_port, pa.ca_certificate_pem AS primary_ca_pem,
       COALESCE(cfg.parameters, '{}'::jsonb) AS config_parameters, COALESCE(cfg.generation, 0) AS config_generation,
       CASE WHEN d.standby THEN COALESCE(
         (SELECT jsonb_agg(jsonb_build_object('id', o.id, 'position', CASE WHEN o.wal_position_at IS NULL THEN '0' ELSE o.wal_position::text END)
                           ORDER BY o.id)
            FROM databases o WHERE o.primary_id = d.primary_id AND o.id <> d.id AND o.deleted_at IS NULL), '[]'::jsonb)
       ELSE '[]'::jsonb END AS sibling_positions
     FROM databases d
       LEFT JOIN databases p ON p.id = d.primary_id
       LEFT JOIN agents pa ON pa.id = p.agent_id
       LEFT JOIN database_config cfg ON cfg.database_id = COALESCE(d.primary_id, d.id)
     WHERE d.agent_id = $1
       AND NOT (d.desired_state = 'purged' AND d.observed_generation >= d.generation)
       AND d.status <> 'promoted'
     ORDER BY d.id`,
    [agentId, standbysLiveSince],
  );
  return rows;
}

/**
 * Serializes an organization's changes to what it runs, to the end of the
 * caller's transaction, then answers the tiers of its live databases meant to
 * run, but for `except`.
 */
export async function lockRunningTiers(db: pg.ClientBase, organizationId: string, except: string): Promise<string[]> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext('allowance:' || $1))", [organizationId]);
  const { rows } = await db.query<{ tier: string }>(
    `SELECT tier FROM databases
     WHERE organization_id = $1 AND deleted_at IS NULL AND primary_id IS NULL AND desired_state = 'running' AND id <> $2`,
    [organizationId, except],
  );
  return rows.map((r) => r.tier);
}

/** Hands deleted databases whose retention ended by `now` to their agents for purging; answers those agents. */
export async function markExpiredForPurge(db: pg.ClientBase, now: Date): Promise<string[]> {
  const { rows } = await db.query<{ agent_id: string }>(
    `UPDATE databases SET desired_state = 'purged', generation = generation + 1, trace_context = '{}', trace_context_at = now(), updated_at = now()
     WHERE desired_state = 'deleted' AND purge_after <= $1 RETURNING agent_id`,
    [now],
  );
  return rows.map((r) => r.agent_id);
}

/**
 * Live databases in one of `statuses` whose agent has not reported for
 * `timeoutSeconds` before `now`, locked FOR UPDATE (skipping those locked by
 * others), with when their agent was last heard from.
 */
export async function lockStranded(
  db: pg.ClientBase,
  statuses: readonly string[],
  timeoutSeconds: number,
  now: Date,
): Promise<(DatabaseRow & { last_seen_at: Date })[]> {
  const { rows } = await db.query<DatabaseRow & { last_seen_at: Date }>(
    `SELECT d.*, a.last_seen_at FROM databases d JOIN agents a ON a.id = d.agent_id
     WHERE d.deleted_at IS NULL AND d.status = ANY ($1::text[])
       AND a.last_seen_at < $3::timestamptz - make_interval(secs => $2)
     FOR UPDATE OF d SKIP LOCKED`,
    [statuses, timeoutSeconds, now],
  );
  return rows;
}
