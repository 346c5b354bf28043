// All SQL about read replicas: rows of `databases` with `primary_id` set, their seeds, and their lag.
import type { InstanceSample } from "@dbaas/proto/agent";
import type pg from "pg";
import type { DatabaseRow } from "./databases.ts";

type Db = pg.Pool | pg.ClientBase;

/** Whether `err` is the unique violation of a name taken twice among one primary's live replicas (case aside). */
export function replicaNameTaken(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === "23505" && e.constraint === "databases_live_replica_name";
}

/** The primary's live replicas and standbys, oldest first, locked FOR UPDATE for the caller's transaction. */
export async function lockLiveReplicas(db: pg.ClientBase, primaryId: string): Promise<DatabaseRow[]> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE primary_id = $1 AND deleted_at IS NULL ORDER BY created_at, id FOR UPDATE",
    [primaryId],
  );
  return rows;
}

export async function countLiveReplicas(db: Db, primaryId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM databases WHERE primary_id = $1 AND deleted_at IS NULL AND NOT standby",
    [primaryId],
  );
  return rows[0]!.n;
}

/** The live (read) replica `id` of the primary, locked FOR UPDATE; undefined when there is none (standbys are not replicas). */
export async function lockReplica(db: pg.ClientBase, primaryId: string, id: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE id = $1 AND primary_id = $2 AND deleted_at IS NULL AND NOT standby FOR UPDATE",
    [id, primaryId],
  );
  return rows[0];
}

/** The organization's live read replica `id` of its live database `primaryId`; undefined when there is none. */
export async function findReplica(db: Db, orgId: string, primaryId: string, id: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>(
    `SELECT r.* FROM databases r JOIN databases p ON p.id = r.primary_id
     WHERE r.id = $1 AND r.primary_id = $2 AND r.organization_id = $3 AND r.deleted_at IS NULL AND NOT r.standby
       AND p.organization_id = $3 AND p.deleted_at IS NULL`,
    [id, primaryId, orgId],
  );
  return rows[0];
}

/** One page of the primary's live read replicas, oldest first (there are at most a few), and how many there are. */
export async function listLiveReplicas(
  db: Db,
  primaryId: string,
  limit: number,
  offset: number,
): Promise<{ rows: DatabaseRow[]; total: number }> {
  const [{ rows }, total] = await Promise.all([
    db.query<DatabaseRow>(
      "SELECT * FROM databases WHERE primary_id = $1 AND deleted_at IS NULL AND NOT standby ORDER BY created_at, id LIMIT $2 OFFSET $3",
      [primaryId, limit, offset],
    ),
    countLiveReplicas(db, primaryId),
  ]);
  return { rows, total };
}

/**
 * The primary's live replicas still to be seeded, locked FOR UPDATE: not yet
 * given a completed seed, and not given up on (no seed and no attempt left).
 */
export async function lockUnseeded(db: pg.ClientBase, primaryId: string, maxAttempts: number): Promise<DatabaseRow[]> {
  const { rows } = await db.query<DatabaseRow>(
    `SELECT * FROM databases WHERE primary_id = $1 AND deleted_at IS NULL AND NOT seed_ready
       AND NOT (seed_backup_id IS NULL AND seed_attempts >= $2)
     ORDER BY created_at, id FOR UPDATE`,
    [primaryId, maxAttempts],
  );
  return rows;
}

/** The live primaries with replicas still to be seeded, locked FOR UPDATE in id order. */
export async function lockPrimariesAwaitingSeed(db: pg.ClientBase, maxAttempts: number): Promise<DatabaseRow[]> {
  const { rows } = await db.query<DatabaseRow>(
    `SELECT * FROM databases p WHERE p.deleted_at IS NULL AND p.primary_id IS NULL AND EXISTS (
       SELECT 1 FROM databases r WHERE r.primary_id = p.id AND r.deleted_at IS NULL AND NOT r.seed_ready
         AND NOT (r.seed_backup_id IS NULL AND r.seed_attempts >= $1))
     ORDER BY p.id FOR UPDATE`,
    [maxAttempts],
  );
  return rows;
}

/** A backup's status and failure reason; undefined once it is gone (pruned). */
export async function seedStatus(db: Db, backupId: string): Promise<{ status: string; failure_reason: string } | undefined> {
  const { rows } = await db.query<{ status: string; failure_reason: string }>("SELECT status, failure_reason FROM backups WHERE id = $1", [
    backupId,
  ]);
  return rows[0];
}

/** The replicas are to be seeded from backup `backupId`: one more attempt each. */
export async function assignSeed(db: pg.ClientBase, ids: string[], backupId: string): Promise<void> {
  await db.query("UPDATE databases SET seed_backup_id = $2, seed_attempts = seed_attempts + 1, updated_at = now() WHERE id = ANY($1)", [
    ids,
    backupId,
  ]);
}

/** The replica's seed failed or vanished: it has none until another is requested. */
export async function clearSeed(db: pg.ClientBase, id: string): Promise<void> {
  await db.query("UPDATE databases SET seed_backup_id = NULL, updated_at = now() WHERE id = $1", [id]);
}

/** The replica is to be seeded again: no seed, its attempts counted afresh. */
export async function resetSeed(db: pg.ClientBase, id: string): Promise<void> {
  await db.query("UPDATE databases SET seed_ready = false, seed_backup_id = NULL, seed_attempts = 0, updated_at = now() WHERE id = $1", [
    id,
  ]);
}

/** The live primary `id`, locked FOR UPDATE; undefined when there is none. */
export async function lockPrimary(db: pg.ClientBase, id: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE id = $1 AND primary_id IS NULL AND deleted_at IS NULL FOR UPDATE",
    [id],
  );
  return rows[0];
}

/** The replica's seed completed: its spec carries it from now on. */
export async function markSeedReady(db: pg.ClientBase, id: string): Promise<void> {
  await db.query("UPDATE databases SET seed_ready = true WHERE id = $1", [id]);
}

/** Where the instance listens for replication now; answers whether that moved. */
export async function setReplicationEndpoint(db: pg.ClientBase, id: string, address: string, port: number): Promise<boolean> {
  const res = await db.query(
    `UPDATE databases SET replication_address = $2, replication_port = $3
     WHERE id = $1 AND (replication_address <> $2 OR replication_port <> $3)`,
    [id, address, port],
  );
  return res.rowCount !== 0;
}

/** A promoted replica: hidden, its port and capacity freed for the new database, never sent to an agent again. */
export async function retire(db: pg.ClientBase, id: string): Promise<void> {
  await db.query(
    "UPDATE databases SET desired_state = 'purged', deleted_at = now(), purge_after = now(), updated_at = now() WHERE id = $1",
    [id],
  );
}

/**
 * Records the replicas' lags that the samples of primaries on `agentId`
 * carry (replicas of another primary are ignored): each as a point of the
 * primary's replication_lag_bytes series (a resent sample once), and, when
 * newer than what the replica shows, as its lag_bytes.
 */
export async function recordReplicaLags(db: pg.ClientBase, agentId: string, samples: InstanceSample[]): Promise<void> {
  const lags = samples.flatMap((s) =>
    s.sampledAt
      ? s.replicaLags.map((l) => ({
          primaryId: s.databaseId,
          replicaId: l.replicaId,
          at: new Date(Number(s.sampledAt!.seconds) * 1000 + Math.floor(s.sampledAt!.nanos / 1e6)),
          bytes: String(l.lagBytes < 0n ? 0n : l.lagBytes),
        }))
      : [],
  );
  if (lags.length === 0) return;
  const col = <T>(f: (l: (typeof lags)[number]) => T) => lags.map(f);
  await db.query(
    `WITH lags AS (
       SELECT u.* FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::bigint[]) AS u (primary_id, replica_id, sampled_at, lag_bytes)
       JOIN databases r ON r.id = u.replica_id AND r.primary_id = u.primary_id
       JOIN databases p ON p.id = u.primary_id AND p.agent_id = $1
     ), points AS (
       INSERT INTO replica_lags (primary_id, replica_id, sampled_at, lag_bytes) SELECT * FROM lags ON CONFLICT DO NOTHING
     )
     UPDATE databases d SET lag_bytes = l.lag_bytes, lag_sampled_at = l.sampled_at
     FROM (SELECT DISTINCT ON (replica_id) * FROM lags ORDER BY replica_id, sampled_at DESC) l
     WHERE d.id = l.replica_id AND (d.lag_sampled_at IS NULL OR d.lag_sampled_at < l.sampled_at)`,
    [agentId, col((l) => l.primaryId), col((l) => l.replicaId), col((l) => l.at), col((l) => l.bytes)],
  );
}

/** The primary's replicas' lag averaged per `step`-second bucket over [from, to), per replica, oldest first. */
export async function lagAggregates(
  db: Db,
  primaryId: string,
  from: Date,
  to: Date,
  step: number,
): Promise<{ replica_id: string; bucket: number; lag_bytes: number }[]> {
  const { rows } = await db.query<{ replica_id: string; bucket: number; lag_bytes: number }>(
    `SELECT replica_id, extract(epoch FROM date_bin(make_interval(secs => $4), sampled_at, 'epoch'))::float8 AS bucket,
       avg(lag_bytes)::float8 AS lag_bytes
     FROM replica_lags WHERE primary_id = $1 AND sampled_at >= $2 AND sampled_at < $3
     GROUP BY 1, 2 ORDER BY 1, 2`,
    [primaryId, from, to, step],
  );
  return rows;
}

/** Deletes lag points taken before `before`; answers how many. */
export async function purgeReplicaLags(db: Db, before: Date): Promise<number> {
  const res = await db.query("DELETE FROM replica_lags WHERE sampled_at < $1", [before]);
  return res.rowCount ?? 0;
}
