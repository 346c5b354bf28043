-- Storage and transfer samples of the agents, forwarded by the databases
-- service. Delivery is at-least-once and unordered: (database_id, sample_id)
-- de-duplicates, and what a sample adds is worked out from its neighbours in
-- sampled_at order when it arrives (see src/metering.ts).
CREATE TABLE usage_samples (
  database_id       text NOT NULL,
  sample_id         text NOT NULL,
  organization_id   text NOT NULL,
  sampled_at        timestamptz NOT NULL,
  storage_bytes     bigint NOT NULL CHECK (storage_bytes >= 0),
  counters_epoch    text NOT NULL,
  network_bytes_in  bigint NOT NULL CHECK (network_bytes_in >= 0),
  network_bytes_out bigint NOT NULL CHECK (network_bytes_out >= 0),
  recorded_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (database_id, sample_id)
);
-- A new sample's neighbours: the last before it and the first after it.
CREATE INDEX usage_samples_db_time ON usage_samples (database_id, sampled_at, sample_id);

-- One row per database that ever sent a sample: ingest locks it, so samples of
-- one database are accrued one batch at a time; it also keeps the latest sample's
-- size, what "stored now" sums.
CREATE TABLE metered_databases (
  database_id           text PRIMARY KEY,
  organization_id       text NOT NULL,
  latest_sampled_at     timestamptz NOT NULL,
  latest_sample_id      text NOT NULL,
  latest_storage_bytes  bigint NOT NULL
);
CREATE INDEX metered_databases_org ON metered_databases (organization_id);

-- The highest cumulative counters seen per counters epoch: a sample adds only
-- what raises them, so a resent or late sample adds nothing and a new epoch
-- (counters restarted at zero) starts from zero.
CREATE TABLE transfer_epochs (
  database_id       text NOT NULL,
  counters_epoch    text NOT NULL,
  network_bytes_in  bigint NOT NULL,
  network_bytes_out bigint NOT NULL,
  PRIMARY KEY (database_id, counters_epoch)
);

-- What the samples accrued, per database and calendar month (UTC): storage in
-- byte-milliseconds (numeric: a TB held for a month exceeds bigint), transfer
-- in bytes, attributed to the month of the sample that measured it.
CREATE TABLE metered_months (
  organization_id  text NOT NULL,
  period           date NOT NULL CHECK (extract(day FROM period) = 1),
  database_id      text NOT NULL,
  storage_byte_ms  numeric NOT NULL DEFAULT 0,
  egress_bytes     numeric NOT NULL DEFAULT 0,
  ingress_bytes    numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, period, database_id)
);
