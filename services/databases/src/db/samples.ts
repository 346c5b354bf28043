// All SQL of `samples`, `sample_minutes` and `sample_rollups`: the agents' measurements, their per-minute
// aggregates (kept current as samples arrive) and hourly roll-ups, which the metrics API is computed from.
import type { InstanceSample } from "@dbaas/proto/agent";
import type pg from "pg";

type Db = pg.Pool | pg.ClientBase;

/** A sample recorded for the first time, with what billing's forwarding needs. */
export interface NewSample {
  organization_id: string;
  database_id: string;
  sample_id: string;
  sampled_at: Date;
  storage_bytes: string;
  counters_epoch: string;
  network_bytes_in: string;
  network_bytes_out: string;
  /** A database's sample: its storage and transfer are billed (a replica's are not: it is billed by the hour). */
  billable: boolean;
}

/**
 * One time bucket of one database, raw samples and roll-ups alike: gauges as
 * sum and count, counters as the sum of valid deltas and the seconds they cover.
 */
export interface Aggregate {
  bucket: number;
  samples: number;
  storage_bytes_sum: number;
  cpu_percent_sum: number;
  memory_bytes_sum: number;
  connections_active_sum: number;
  connections_idle_sum: number;
  connections_idle_in_transaction_sum: number;
  wal_archive_lag_seconds_sum: number;
  replication_lag_bytes_sum: number;
  stat_seconds: number;
  xacts: number;
  tup_fetched: number;
  tup_inserted: number;
  tup_updated: number;
  tup_deleted: number;
  blks_hit: number;
  blks_read: number;
  deadlocks: number;
  network_seconds: number;
  network_bytes_in: number;
  network_bytes_out: number;
}

/** Two samples further apart than this have no interval between them: that stretch is left out, never averaged over. */
export const MAX_SAMPLE_GAP_SECONDS = 15 * 60;

const GAUGES = [
  "storage_bytes",
  "cpu_percent",
  "memory_bytes",
  "connections_active",
  "connections_idle",
  "connections_idle_in_transaction",
  "wal_archive_lag_seconds",
  "replication_lag_bytes",
] as const;
const STAT_COUNTERS = ["tup_fetched", "tup_inserted", "tup_updated", "tup_deleted", "blks_hit", "blks_read", "deadlocks"] as const;

/**
 * Records the samples of databases placed on `agentId` (others are ignored)
 * and brings their minutes up to date; a sample already recorded is skipped.
 * Returns the ones new here.
 */
export async function insertSamples(db: pg.ClientBase, agentId: string, samples: InstanceSample[]): Promise<NewSample[]> {
  const valid = samples.filter((s) => s.sampledAt && s.sampleId !== "" && s.databaseId !== "");
  if (valid.length === 0) return [];
  await lockMinutes(
    db,
    valid.map((s) => s.databaseId),
  );
  const col = <T>(f: (s: InstanceSample) => T) => valid.map(f);
  const { rows } = await db.query<NewSample>(
    `WITH ins AS (
       INSERT INTO samples (database_id, sample_id, sampled_at, counters_epoch, storage_bytes, network_bytes_in, network_bytes_out,
         cpu_percent, memory_bytes, connections_active, connections_idle, connections_idle_in_transaction, xact_commit, xact_rollback,
         tup_fetched, tup_inserted, tup_updated, tup_deleted, blks_hit, blks_read, deadlocks, wal_archive_lag_seconds, replication_lag_bytes)
       SELECT u.* FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
         $9::float8[], $10::bigint[], $11::int[], $12::int[], $13::int[], $14::bigint[], $15::bigint[],
         $16::bigint[], $17::bigint[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[], $22::bigint[], $23::float8[], $24::bigint[])
         AS u (database_id, sample_id, sampled_at, counters_epoch, storage_bytes, network_bytes_in, network_bytes_out,
           cpu_percent, memory_bytes, connections_active, connections_idle, connections_idle_in_transaction, xact_commit, xact_rollback,
           tup_fetched, tup_inserted, tup_updated, tup_deleted, blks_hit, blks_read, deadlocks, wal_archive_lag_seconds, replication_lag_bytes)
       WHERE EXISTS (SELECT 1 FROM databases d WHERE d.id = u.database_id AND d.agent_id = $1)
       ON CONFLICT (database_id, sample_id) DO NOTHING
       RETURNING database_id, sample_id, sampled_at, storage_bytes, counters_epoch, network_bytes_in, network_bytes_out)
     SELECT d.organization_id, d.primary_id IS NULL AS billable, ins.* FROM ins JOIN databases d ON d.id = ins.database_id`,
    [
      agentId,
      col((s) => s.databaseId),
      col((s) => s.sampleId),
      col((s) => new Date(Number(s.sampledAt!.seconds) * 1000 + Math.floor(s.sampledAt!.nanos / 1e6))),
      col((s) => s.countersEpoch),
      col((s) => String(s.storageBytes)),
      col((s) => String(s.networkBytesIn)),
      col((s) => String(s.networkBytesOut)),
      col((s) => s.cpuPercent),
      col((s) => String(s.memoryBytes)),
      col((s) => s.connectionsActive),
      col((s) => s.connectionsIdle),
      col((s) => s.connectionsIdleInTransaction),
      col((s) => String(s.xactCommit)),
      col((s) => String(s.xactRollback)),
      col((s) => String(s.tupFetched)),
      col((s) => String(s.tupInserted)),
      col((s) => String(s.tupUpdated)),
      col((s) => String(s.tupDeleted)),
      col((s) => String(s.blksHit)),
      col((s) => String(s.blksRead)),
      col((s) => String(s.deadlocks)),
      col((s) => s.walArchiveLagSeconds),
      col((s) => String(s.replicationLagBytes)),
    ],
  );
  await refreshMinutes(db, rows);
  return rows;
}

const MINUTE = "date_bin('1 minute', sampled_at, 'epoch')";
const AGGREGATE_COLUMNS = [
  "samples",
  ...GAUGES.map((g) => `${g}_sum`),
  "stat_seconds",
  "xacts",
  ...STAT_COUNTERS,
  "network_seconds",
  "network_bytes_in",
  "network_bytes_out",
];
const upsert = (key: string) =>
  `ON CONFLICT (database_id, ${key}) DO UPDATE SET ${AGGREGATE_COLUMNS.map((c) => `${c} = excluded.${c}`).join(", ")}`;

/**
 * The aggregates per database and minute of the samples `source` yields (a
 * FROM item of `samples` rows) that pass `keep`. A counter's interval belongs
 * to the minute of the sample that ends it and counts only if it is valid: a
 * previous sample at most MAX_SAMPLE_GAP_SECONDS earlier, no counter going
 * backwards (a statistics reset) and, for the byte counters, the same epoch.
 * So that each kept sample sees its predecessor, `source` holds each
 * database's samples from the predecessor of its first kept one on (if at most
 * MAX_SAMPLE_GAP_SECONDS older: an older one ends no valid interval anyway).
 */
function minutesSql(source: string, keep: string): string {
  const lagged = [
    "lag(sampled_at) OVER w AS p_at",
    "lag(counters_epoch) OVER w AS p_epoch",
    "lag(xact_commit + xact_rollback) OVER w AS p_xacts",
    "lag(network_bytes_in) OVER w AS p_in",
    "lag(network_bytes_out) OVER w AS p_out",
    ...STAT_COUNTERS.map((c) => `lag(${c}) OVER w AS p_${c}`),
  ].join(", ");
  const statOk = [
    `s.p_at >= s.sampled_at - interval '${MAX_SAMPLE_GAP_SECONDS} seconds'`,
    "s.xact_commit + s.xact_rollback >= s.p_xacts",
    ...STAT_COUNTERS.map((c) => `s.${c} >= s.p_${c}`),
  ].join(" AND ");
  const netOk = `s.p_at >= s.sampled_at - interval '${MAX_SAMPLE_GAP_SECONDS} seconds' AND s.counters_epoch = s.p_epoch AND s.network_bytes_in >= s.p_in AND s.network_bytes_out >= s.p_out`;
  const stat = (expr: string) => `coalesce(sum(${expr}) FILTER (WHERE stat_ok), 0)::float8`;
  const net = (expr: string) => `coalesce(sum(${expr}) FILTER (WHERE net_ok), 0)::float8`;
  return `
    SELECT database_id, minute, count(*)::int AS samples, ${GAUGES.map((g) => `sum(${g})::float8 AS ${g}_sum`).join(", ")},
      ${stat("dt")} AS stat_seconds, ${stat("(xact_commit + xact_rollback) - p_xacts")} AS xacts,
      ${STAT_COUNTERS.map((c) => `${stat(`${c} - p_${c}`)} AS ${c}`).join(", ")},
      ${net("dt")} AS network_seconds, ${net("network_bytes_in - p_in")} AS network_bytes_in, ${net("network_bytes_out - p_out")} AS network_bytes_out
    FROM (
      SELECT s.*, ${MINUTE} AS minute, extract(epoch FROM s.sampled_at - s.p_at) AS dt, coalesce(${statOk}, false) AS stat_ok,
        coalesce(${netOk}, false) AS net_ok
      FROM (
        SELECT database_id, sampled_at, counters_epoch, ${GAUGES.join(", ")}, xact_commit, xact_rollback, network_bytes_in, network_bytes_out,
          ${STAT_COUNTERS.join(", ")}, ${lagged} FROM ${source}
        WINDOW w AS (PARTITION BY database_id ORDER BY sampled_at)
      ) s
    ) i WHERE ${keep} GROUP BY database_id, minute`;
}

/**
 * Recomputes from `samples` the minutes of the samples just recorded and of
 * the sample that follows each of them (a late sample changes its successor's
 * interval). Callers hold the databases' minutes lock (lockMinutes). Each
 * database's range is read by its own index scan (`OFFSET 0` keeps the
 * planner from flattening it into a join over every sample).
 */
async function refreshMinutes(db: pg.ClientBase, fresh: { database_id: string; sampled_at: Date }[]): Promise<void> {
  if (fresh.length === 0) return;
  const gap = `interval '${MAX_SAMPLE_GAP_SECONDS} seconds'`;
  await db.query(
    `WITH fresh AS (SELECT * FROM unnest($1::text[], $2::timestamptz[]) AS f (database_id, sampled_at)),
     touched AS (
       SELECT database_id, sampled_at FROM fresh
       UNION
       SELECT f.database_id, n.sampled_at FROM fresh f CROSS JOIN LATERAL (
         SELECT s.sampled_at FROM samples s WHERE s.database_id = f.database_id AND s.sampled_at > f.sampled_at
           AND s.sampled_at <= f.sampled_at + ${gap} ORDER BY s.sampled_at LIMIT 1) n
     ),
     affected AS (SELECT DISTINCT database_id, ${MINUTE} AS minute FROM touched),
     spans AS (SELECT database_id, min(minute) AS first, max(minute) + interval '1 minute' AS hi FROM affected GROUP BY database_id),
     ranges AS (
       SELECT database_id, hi, coalesce((SELECT max(p.sampled_at) FROM samples p
         WHERE p.database_id = spans.database_id AND p.sampled_at < first AND p.sampled_at >= first - ${gap}), first) AS lo
       FROM spans
     )
     INSERT INTO sample_minutes (database_id, minute, ${AGGREGATE_COLUMNS.join(", ")})
     ${minutesSql(
       `(SELECT s.* FROM ranges r CROSS JOIN LATERAL (
          SELECT * FROM samples s WHERE s.database_id = r.database_id AND s.sampled_at >= r.lo AND s.sampled_at < r.hi OFFSET 0) s) src`,
       "(database_id, minute) IN (SELECT database_id, minute FROM affected)",
     )}
     ${upsert("minute")}`,
    [fresh.map((f) => f.database_id), fresh.map((f) => f.sampled_at)],
  );
}

/**
 * Serializes the recording of samples per database until the transaction
 * ends, in one order (no deadlock): a minute is recomputed from what the
 * transaction sees, so two reports of one database must not overlap.
 */
async function lockMinutes(db: pg.ClientBase, databaseIds: string[]): Promise<void> {
  await db.query(
    `SELECT pg_advisory_xact_lock(hashtextextended('sample_minutes:' || id, 0))
     FROM (SELECT DISTINCT id FROM unnest($1::text[]) AS u (id) ORDER BY id) ids`,
    [databaseIds],
  );
}

/**
 * Rebuilds every database's minutes of samples taken in [from, to) from
 * scratch, in time order as reports would have written them (for data
 * written to `samples` directly, as the metrics bench seeds it).
 */
export async function rebuildMinutes(db: Db, from: Date, to: Date): Promise<number> {
  const res = await db.query(
    `INSERT INTO sample_minutes (database_id, minute, ${AGGREGATE_COLUMNS.join(", ")})
     SELECT * FROM (${minutesSql(
       `(SELECT * FROM samples WHERE sampled_at >= $1::timestamptz - interval '${MAX_SAMPLE_GAP_SECONDS} seconds' AND sampled_at < $2) src`,
       "sampled_at >= $1",
     )}) m ORDER BY minute, database_id
     ${upsert("minute")}`,
    [from, to],
  );
  return res.rowCount ?? 0;
}

/** `table`'s aggregates (per `key`: minute or hour) of one database regrouped per `step` seconds over [from, to), oldest first. */
async function regroup(db: Db, table: string, key: string, databaseId: string, from: Date, to: Date, step: number): Promise<Aggregate[]> {
  const sums = AGGREGATE_COLUMNS.map((c) => `sum(${c})::${c === "samples" ? "int" : "float8"} AS ${c}`).join(", ");
  const { rows } = await db.query<Aggregate>(
    `SELECT extract(epoch FROM date_bin(make_interval(secs => $4), ${key}, 'epoch'))::float8 AS bucket, ${sums}
     FROM ${table} WHERE database_id = $1 AND ${key} >= $2 AND ${key} < $3 GROUP BY date_bin(make_interval(secs => $4), ${key}, 'epoch')
     ORDER BY 1`,
    [databaseId, from, to, step],
  );
  return rows;
}

/**
 * One database's per-minute aggregates regrouped per `step` seconds over
 * minutes starting in [from, to), oldest first: a minute counts in the bucket
 * holding its start (for a step that is a multiple of 60, the bucket of each
 * of its samples).
 */
export const minuteAggregates = (db: Db, databaseId: string, from: Date, to: Date, step: number) =>
  regroup(db, "sample_minutes", "minute", databaseId, from, to, step);

/** One database's hourly roll-ups regrouped per `step` seconds over hours starting in [from, to), oldest first. */
export const rollupAggregates = (db: Db, databaseId: string, from: Date, to: Date, step: number) =>
  regroup(db, "sample_rollups", "hour", databaseId, from, to, step);

/**
 * Rolls up every database's minutes of the hours starting in [from, to)
 * (whole hours) into `sample_rollups`, replacing rows of those hours (a late
 * sample is counted when its hour is rolled up again). Returns rows written.
 */
export async function rollUp(db: Db, from: Date, to: Date): Promise<number> {
  const sums = AGGREGATE_COLUMNS.map((c) => `sum(${c})${c === "samples" ? "::int" : ""}`).join(", ");
  const res = await db.query(
    `INSERT INTO sample_rollups (database_id, hour, ${AGGREGATE_COLUMNS.join(", ")})
     SELECT database_id, date_bin('1 hour', minute, 'epoch'), ${sums}
     FROM sample_minutes WHERE minute >= $1 AND minute < $2 GROUP BY 1, 2
     ${upsert("hour")}`,
    [from, to],
  );
  return res.rowCount ?? 0;
}

/** The start of the newest hour rolled up, if any. */
export async function latestRollup(db: Db): Promise<Date | undefined> {
  const { rows } = await db.query<{ hour: Date | null }>("SELECT max(hour) AS hour FROM sample_rollups");
  return rows[0]?.hour ?? undefined;
}

/** Deletes samples taken before `samplesBefore` with their minutes, and roll-ups of hours before `rollupsBefore`. */
export async function purgeSamples(
  db: Db,
  samplesBefore: Date,
  rollupsBefore: Date,
): Promise<{ samples: number; minutes: number; rollups: number }> {
  const s = await db.query("DELETE FROM samples WHERE sampled_at < $1", [samplesBefore]);
  const m = await db.query("DELETE FROM sample_minutes WHERE minute < $1", [samplesBefore]);
  const r = await db.query("DELETE FROM sample_rollups WHERE hour < $1", [rollupsBefore]);
  return { samples: s.rowCount ?? 0, minutes: m.rowCount ?? 0, rollups: r.rowCount ?? 0 };
}
