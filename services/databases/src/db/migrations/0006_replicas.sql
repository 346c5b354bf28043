-- Read replicas (#14) are rows of `databases` with `primary_id` set: they share placement, ports, generations,
-- observations, operations and the outbox with databases. Every query about databases excludes them.
ALTER TABLE databases ADD COLUMN primary_id text REFERENCES databases (id);
-- The primary's base backup the replica is seeded from (requested after the replica exists, so its slot does);
-- how many seed backups were requested; whether the spec carries it (set once that backup completed).
ALTER TABLE databases ADD COLUMN seed_backup_id text;
ALTER TABLE databases ADD COLUMN seed_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE databases ADD COLUMN seed_ready boolean NOT NULL DEFAULT false;
-- Where a running instance listens for replication, as its agent last reported it ('' / 0 until then).
ALTER TABLE databases ADD COLUMN replication_address text NOT NULL DEFAULT '';
ALTER TABLE databases ADD COLUMN replication_port integer NOT NULL DEFAULT 0;
-- A replica's latest lag as its primary's agent measured it, and when.
ALTER TABLE databases ADD COLUMN lag_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE databases ADD COLUMN lag_sampled_at timestamptz;
-- A promoted replica's database: the agent takes over this instance's data directory.
ALTER TABLE databases ADD COLUMN adopt_instance_id text;

-- Database names stay unique per organization, replicas aside; a replica's name is unique among its primary's
-- live replicas.
DROP INDEX databases_live_name;
CREATE UNIQUE INDEX databases_live_name ON databases (organization_id, lower(name)) WHERE deleted_at IS NULL AND primary_id IS NULL;
CREATE UNIQUE INDEX databases_live_replica_name ON databases (primary_id, lower(name))
  WHERE deleted_at IS NULL AND primary_id IS NOT NULL;
CREATE INDEX databases_primary ON databases (primary_id) WHERE primary_id IS NOT NULL;

-- Each replica's lag as its primary's samples reported it, for the primary's replication_lag_bytes metric;
-- kept as long as the samples.
CREATE TABLE replica_lags (
  primary_id text NOT NULL,
  replica_id text NOT NULL,
  sampled_at timestamptz NOT NULL,
  lag_bytes bigint NOT NULL,
  PRIMARY KEY (primary_id, sampled_at, replica_id)
);
CREATE INDEX replica_lags_time ON replica_lags (sampled_at);
