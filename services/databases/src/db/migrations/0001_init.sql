-- Agents: one per host, registered with the regions they serve and their capacity.
CREATE TABLE agents (
  id text PRIMARY KEY,
  regions text[] NOT NULL,
  capacity integer NOT NULL CHECK (capacity >= 0),
  port_range_start integer NOT NULL,
  port_range_end integer NOT NULL,
  versions text[] NOT NULL,
  ca_certificate_pem text NOT NULL,
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE databases (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  name text NOT NULL,
  region text NOT NULL,
  tier text NOT NULL,
  version text NOT NULL,
  -- Public lifecycle status; moved out of a transitional status only by agent reports.
  status text NOT NULL,
  status_reason text NOT NULL DEFAULT '',
  agent_id text NOT NULL REFERENCES agents (id),
  port integer NOT NULL,
  -- What the agent must converge to: running | stopped | deleted | purged.
  desired_state text NOT NULL,
  generation bigint NOT NULL DEFAULT 1,
  observed_generation bigint NOT NULL DEFAULT 0,
  -- SCRAM-SHA-256 verifier handed to the agent; the password itself is never stored.
  scram_verifier text NOT NULL,
  credentials_generation bigint NOT NULL DEFAULT 1,
  applied_credentials_generation bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,
  purge_after timestamptz
);

-- Names are unique among an organization's live databases.
CREATE UNIQUE INDEX databases_live_name ON databases (organization_id, lower(name)) WHERE deleted_at IS NULL;
-- A port belongs to one instance on an agent until that instance's data is purged.
CREATE UNIQUE INDEX databases_agent_port ON databases (agent_id, port) WHERE desired_state <> 'purged';
CREATE INDEX databases_org_created ON databases (organization_id, created_at DESC) WHERE deleted_at IS NULL;

-- Every operation on a database, so nobody is left guessing about a transitional status.
CREATE TABLE operations (
  id text PRIMARY KEY,
  database_id text NOT NULL REFERENCES databases (id),
  type text NOT NULL,
  status text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
  -- The spec generation this operation waits for.
  generation bigint NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  error text NOT NULL DEFAULT ''
);
CREATE INDEX operations_database ON operations (database_id, started_at DESC);

-- Transactional outbox: written in the same transaction as the change it describes,
-- delivered to billing by the relay, at least once.
CREATE TABLE outbox (
  id bigserial PRIMARY KEY,
  event_id text NOT NULL UNIQUE,
  topic text NOT NULL,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  last_error text NOT NULL DEFAULT '',
  delivered_at timestamptz
);
CREATE INDEX outbox_pending ON outbox (id) WHERE delivered_at IS NULL;
