-- High availability (#21): standbys are rows of `databases` with `primary_id` set and `standby` true
-- ("node-…"): seeded and streaming like read replicas, never published, billed as compute.
ALTER TABLE databases ADD COLUMN standby boolean NOT NULL DEFAULT false;
-- A primary's wanted standbys (0-2) and whether it commits synchronously; its member id (the server it runs
-- on now: a promoted standby's id after a failover).
ALTER TABLE databases ADD COLUMN ha_standbys integer NOT NULL DEFAULT 0 CHECK (ha_standbys BETWEEN 0 AND 2);
ALTER TABLE databases ADD COLUMN ha_synchronous boolean NOT NULL DEFAULT false;
ALTER TABLE databases ADD COLUMN node_id text;
-- The instance's WAL position (bytes) as its agent last reported it, and when that report arrived.
ALTER TABLE databases ADD COLUMN wal_position bigint NOT NULL DEFAULT 0;
ALTER TABLE databases ADD COLUMN wal_position_at timestamptz;
-- Whether the agent reports the primary fenced (no client sessions).
ALTER TABLE databases ADD COLUMN fenced boolean NOT NULL DEFAULT false;
-- A planned switchover under way: the standby it hands over to, since when, and since when the primary is to be
-- fenced (once that standby had nearly all its WAL; until then the primary keeps taking writes).
ALTER TABLE databases ADD COLUMN switchover_to text;
ALTER TABLE databases ADD COLUMN switchover_started_at timestamptz;
ALTER TABLE databases ADD COLUMN switchover_fenced_at timestamptz;
-- The last failover: when, why, from which member to which.
ALTER TABLE databases ADD COLUMN last_failover_at timestamptz;
ALTER TABLE databases ADD COLUMN last_failover_reason text NOT NULL DEFAULT '';
ALTER TABLE databases ADD COLUMN last_failover_from text NOT NULL DEFAULT '';
ALTER TABLE databases ADD COLUMN last_failover_to text NOT NULL DEFAULT '';

-- A failover's operation names its reason and both members.
ALTER TABLE operations ADD COLUMN reason text NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN from_member text NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN to_member text NOT NULL DEFAULT '';

-- The lease a highly available primary's agent holds on it: renewed by that agent (RenewLeases) while the
-- primary is its; a failover moves it to the promoted standby's agent. A standby is promoted only once
-- expires_at plus a margin has passed.
CREATE TABLE ha_leases (
  database_id text PRIMARY KEY REFERENCES databases (id),
  agent_id text NOT NULL REFERENCES agents (id),
  expires_at timestamptz NOT NULL,
  renewed_at timestamptz NOT NULL
);

-- Instances left behind by a failover (the old primary, under the database's id, on its old agent): the agent
-- is told to remove them locally (the blob store keeps the database's backups). Each holds its port on that
-- agent until the agent confirms; the failover's operation records when its data was discarded.
CREATE TABLE ha_discards (
  agent_id text NOT NULL REFERENCES agents (id),
  instance_id text NOT NULL,
  port integer NOT NULL,
  operation_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, instance_id)
);

-- Every primary has a member id from now on (new ones get theirs at insert).
UPDATE databases SET node_id = 'node-' || substr(md5(id || clock_timestamp()::text), 1, 16) WHERE primary_id IS NULL AND node_id IS NULL;
