import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { isArchivedName } from "../backups/wal.ts";

/**
 * What one sample of an instance is made of besides the runtime's own
 * measures (CPU, memory, storage: InstanceAccess.usage): the statistics
 * views over the agent's session, the WAL spool's oldest file for the
 * archive lag.
 */

/** Seconds since the oldest WAL file waiting in the spool for upload was written; 0 when the spool is empty. */
export async function walArchiveLagSeconds(spoolDir: string, now: Date): Promise<number> {
  let names: string[];
  try {
    names = (await readdir(spoolDir)).filter(isArchivedName);
  } catch {
    return 0;
  }
  let oldest = Number.POSITIVE_INFINITY;
  for (const name of names) {
    const st = await stat(path.join(spoolDir, name)).catch(() => undefined);
    if (st) oldest = Math.min(oldest, st.mtimeMs);
  }
  return Number.isFinite(oldest) ? Math.max(0, (now.getTime() - oldest) / 1000) : 0;
}

export interface PgStats {
  xactCommit: bigint;
  xactRollback: bigint;
  tupFetched: bigint;
  tupInserted: bigint;
  tupUpdated: bigint;
  tupDeleted: bigint;
  blksHit: bigint;
  blksRead: bigint;
  deadlocks: bigint;
  connectionsActive: number;
  connectionsIdle: number;
  connectionsIdleInTransaction: number;
}

/** Databases that are not the customer's: the agent's own sessions use `postgres`, the templates are never connected to. */
const NOT_CUSTOMER = ["postgres", "template0", "template1"];

/** pg_stat_database summed over the customer's databases, and client backends by state (the agent's own sessions, as `agentRole`, left out). */
export async function pgStats(c: pg.Client, agentRole: string): Promise<PgStats> {
  const { rows } = await c.query<Record<string, string>>(
    `SELECT coalesce(sum(xact_commit), 0)::text AS xact_commit, coalesce(sum(xact_rollback), 0)::text AS xact_rollback,
       coalesce(sum(tup_fetched), 0)::text AS tup_fetched, coalesce(sum(tup_inserted), 0)::text AS tup_inserted,
       coalesce(sum(tup_updated), 0)::text AS tup_updated, coalesce(sum(tup_deleted), 0)::text AS tup_deleted,
       coalesce(sum(blks_hit), 0)::text AS blks_hit, coalesce(sum(blks_read), 0)::text AS blks_read,
       coalesce(sum(deadlocks), 0)::text AS deadlocks
     FROM pg_stat_database WHERE datname IS NOT NULL AND datname <> ALL($1)`,
    [NOT_CUSTOMER],
  );
  const activity = await c.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND usename IS DISTINCT FROM $1 AND state IS NOT NULL GROUP BY state`,
    [agentRole],
  );
  const by = (pred: (s: string) => boolean) => activity.rows.filter((r) => pred(r.state)).reduce((a, r) => a + r.n, 0);
  const r = rows[0]!;
  return {
    xactCommit: BigInt(r.xact_commit!),
    xactRollback: BigInt(r.xact_rollback!),
    tupFetched: BigInt(r.tup_fetched!),
    tupInserted: BigInt(r.tup_inserted!),
    tupUpdated: BigInt(r.tup_updated!),
    tupDeleted: BigInt(r.tup_deleted!),
    blksHit: BigInt(r.blks_hit!),
    blksRead: BigInt(r.blks_read!),
    deadlocks: BigInt(r.deadlocks!),
    connectionsActive: by((s) => s === "active"),
    connectionsIdle: by((s) => s === "idle"),
    connectionsIdleInTransaction: by((s) => s.startsWith("idle in transaction")),
  };
}

export interface ReplicationStats {
  /** A standby's WAL received but not replayed yet; 0 on a primary. */
  replicationLagBytes: bigint;
  /** A primary's connected replicas (application_name is the replica's id). */
  replicaLags: { replicaId: string; lagBytes: bigint; state: string }[];
}

/**
 * Replication as the instance sees it: on a standby, its replay lag behind
 * what it received; on a primary, each connected replica's lag behind the
 * current WAL position (up to what it replayed, or, while it catches up
 * before replaying anything, what was sent to it).
 */
export async function replicationStats(c: pg.Client): Promise<ReplicationStats> {
  const standby = (await c.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r")).rows[0]!.r;
  if (standby) {
    const { rows } = await c.query<{ lag: string }>(
      "SELECT coalesce(greatest(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), 0), 0)::bigint::text AS lag",
    );
    return { replicationLagBytes: BigInt(rows[0]!.lag), replicaLags: [] };
  }
  const { rows } = await c.query<{ id: string; state: string; lag: string }>(
    `SELECT application_name AS id, coalesce(state, '') AS state,
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), coalesce(replay_lsn, flush_lsn, write_lsn, sent_lsn)), 0)::bigint::text AS lag
     FROM pg_stat_replication WHERE starts_with(application_name, 'rep-') ORDER BY application_name`,
  );
  return { replicationLagBytes: 0n, replicaLags: rows.map((r) => ({ replicaId: r.id, lagBytes: BigInt(r.lag), state: r.state })) };
}
