-- What agents measured of their instances (ReportSamples), every 30 s by default; kept 7 days.
-- Counters are stored as the agent read them (cumulative); rates are deltas between consecutive
-- samples taken at query time, so a resent or late sample never skews a stored value.
CREATE TABLE samples (
  database_id text NOT NULL,
  sample_id text NOT NULL,
  sampled_at timestamptz NOT NULL,
  counters_epoch text NOT NULL,
  storage_bytes bigint NOT NULL,
  network_bytes_in bigint NOT NULL,
  network_bytes_out bigint NOT NULL,
  cpu_percent double precision NOT NULL,
  memory_bytes bigint NOT NULL,
  connections_active integer NOT NULL,
  connections_idle integer NOT NULL,
  connections_idle_in_transaction integer NOT NULL,
  xact_commit bigint NOT NULL,
  xact_rollback bigint NOT NULL,
  tup_fetched bigint NOT NULL,
  tup_inserted bigint NOT NULL,
  tup_updated bigint NOT NULL,
  tup_deleted bigint NOT NULL,
  blks_hit bigint NOT NULL,
  blks_read bigint NOT NULL,
  deadlocks bigint NOT NULL,
  wal_archive_lag_seconds double precision NOT NULL,
  replication_lag_bytes bigint NOT NULL,
  -- A resent sample is recorded once.
  PRIMARY KEY (database_id, sample_id)
);
-- Queries read one database's samples in time order; purges drop by time.
CREATE INDEX samples_database_time ON samples (database_id, sampled_at);
CREATE INDEX samples_time ON samples (sampled_at);

-- Hourly roll-ups of the samples, kept 30 days: gauges as sum and count, counters as the sum of the
-- valid deltas whose interval ended in the hour and the seconds those intervals cover.
CREATE TABLE sample_rollups (
  database_id text NOT NULL,
  hour timestamptz NOT NULL,
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
  PRIMARY KEY (database_id, hour)
);
CREATE INDEX sample_rollups_hour ON sample_rollups (hour);
