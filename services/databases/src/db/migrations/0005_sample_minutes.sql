-- Per-minute aggregates of the samples, kept 7 days with them: what the metrics API reads for buckets in the raw
-- horizon and what the hourly roll-ups are summed from. ReportSamples recomputes, from the samples, the minutes its
-- new samples fall in and the minute of the sample that follows each (a late sample changes its neighbour's delta),
-- so a row is always the aggregate of what `samples` holds: gauges as sum and count, counters as the sum of the
-- valid deltas whose interval ended in the minute and the seconds those intervals cover (as in sample_rollups).
CREATE TABLE sample_minutes (
  database_id text NOT NULL,
  minute timestamptz NOT NULL,
  samples integer NOT NULL,
  storage_bytes_sum double precision NOT NULL,
  cpu_percent_sum double precision NOT NULL,
  memory_bytes_sum double precision NOT NULL,
  connections_active_sum double precision NOT NULL,
  connections_idle_sum double precision NOT NULL,
  connections_idle_in_transaction_sum double precision NOT NULL,
  wal_archive_lag_seconds_sum double precision NOT NULL,
  replication_lag_bytes_sum double precision NOT NULL,
  stat_seconds double precision NOT NULL,
  xacts double precision NOT NULL,
  tup_fetched double precision NOT NULL,
  tup_inserted double precision NOT NULL,
  tup_updated double precision NOT NULL,
  tup_deleted double precision NOT NULL,
  blks_hit double precision NOT NULL,
  blks_read double precision NOT NULL,
  deadlocks double precision NOT NULL,
  network_seconds double precision NOT NULL,
  network_bytes_in double precision NOT NULL,
  network_bytes_out double precision NOT NULL,
  -- A query reads one database's minutes in order from the index alone: rows of many databases interleave in
  -- the heap (they arrive together), so a heap scan of a week would touch a page per minute.
  PRIMARY KEY (database_id, minute) INCLUDE (samples, storage_bytes_sum, cpu_percent_sum, memory_bytes_sum,
    connections_active_sum, connections_idle_sum, connections_idle_in_transaction_sum, wal_archive_lag_seconds_sum,
    replication_lag_bytes_sum, stat_seconds, xacts, tup_fetched, tup_inserted, tup_updated, tup_deleted, blks_hit, blks_read,
    deadlocks, network_seconds, network_bytes_in, network_bytes_out)
);
CREATE INDEX sample_minutes_minute ON sample_minutes (minute);

-- The minutes of the samples stored before this migration (the same arithmetic as db/samples.ts).
INSERT INTO sample_minutes
SELECT database_id, to_timestamp(floor(extract(epoch FROM sampled_at) / 60) * 60), count(*)::int,
  sum(storage_bytes), sum(cpu_percent), sum(memory_bytes), sum(connections_active), sum(connections_idle),
  sum(connections_idle_in_transaction), sum(wal_archive_lag_seconds), sum(replication_lag_bytes),
  coalesce(sum(dt) FILTER (WHERE stat_ok), 0), coalesce(sum(xact_commit + xact_rollback - p_xacts) FILTER (WHERE stat_ok), 0),
  coalesce(sum(tup_fetched - p_tup_fetched) FILTER (WHERE stat_ok), 0), coalesce(sum(tup_inserted - p_tup_inserted) FILTER (WHERE stat_ok), 0),
  coalesce(sum(tup_updated - p_tup_updated) FILTER (WHERE stat_ok), 0), coalesce(sum(tup_deleted - p_tup_deleted) FILTER (WHERE stat_ok), 0),
  coalesce(sum(blks_hit - p_blks_hit) FILTER (WHERE stat_ok), 0), coalesce(sum(blks_read - p_blks_read) FILTER (WHERE stat_ok), 0),
  coalesce(sum(deadlocks - p_deadlocks) FILTER (WHERE stat_ok), 0),
  coalesce(sum(dt) FILTER (WHERE net_ok), 0), coalesce(sum(network_bytes_in - p_in) FILTER (WHERE net_ok), 0),
  coalesce(sum(network_bytes_out - p_out) FILTER (WHERE net_ok), 0)
FROM (
  SELECT s.*, extract(epoch FROM s.sampled_at - s.p_at) AS dt,
    coalesce(s.p_at >= s.sampled_at - interval '900 seconds' AND s.xact_commit + s.xact_rollback >= s.p_xacts
      AND s.tup_fetched >= s.p_tup_fetched AND s.tup_inserted >= s.p_tup_inserted AND s.tup_updated >= s.p_tup_updated
      AND s.tup_deleted >= s.p_tup_deleted AND s.blks_hit >= s.p_blks_hit AND s.blks_read >= s.p_blks_read
      AND s.deadlocks >= s.p_deadlocks, false) AS stat_ok,
    coalesce(s.p_at >= s.sampled_at - interval '900 seconds' AND s.counters_epoch = s.p_epoch
      AND s.network_bytes_in >= s.p_in AND s.network_bytes_out >= s.p_out, false) AS net_ok
  FROM (
    SELECT samples.*, lag(sampled_at) OVER w AS p_at, lag(counters_epoch) OVER w AS p_epoch,
      lag(xact_commit + xact_rollback) OVER w AS p_xacts, lag(network_bytes_in) OVER w AS p_in, lag(network_bytes_out) OVER w AS p_out,
      lag(tup_fetched) OVER w AS p_tup_fetched, lag(tup_inserted) OVER w AS p_tup_inserted, lag(tup_updated) OVER w AS p_tup_updated,
      lag(tup_deleted) OVER w AS p_tup_deleted, lag(blks_hit) OVER w AS p_blks_hit, lag(blks_read) OVER w AS p_blks_read,
      lag(deadlocks) OVER w AS p_deadlocks
    FROM samples WINDOW w AS (PARTITION BY database_id ORDER BY sampled_at)
  ) s
) i
GROUP BY 1, 2;
