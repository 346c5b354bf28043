-- Trusted sources (docs/product.md, Trusted sources and connection pooling): the address ranges a
-- database admits on its published port, its pooler and its replicas; none = every address. An
-- entry with expires_at stops admitting then (the agent drops it itself) and is deleted by the
-- background sweep.
CREATE TABLE trusted_sources (
  id text PRIMARY KEY,
  database_id text NOT NULL,
  cidr cidr NOT NULL,
  description text NOT NULL DEFAULT '',
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (database_id, cidr)
);
CREATE INDEX trusted_sources_expiry ON trusted_sources (expires_at) WHERE expires_at IS NOT NULL;

-- A database's pooler settings as the customer changed them; no row = the defaults (enabled,
-- transaction mode, the tier's pool size).
CREATE TABLE poolers (
  database_id text PRIMARY KEY,
  enabled boolean NOT NULL DEFAULT true,
  mode text NOT NULL DEFAULT 'transaction' CHECK (mode IN ('transaction', 'session')),
  -- NULL: the tier's default (it follows a resize).
  pool_size integer CHECK (pool_size IS NULL OR pool_size >= 1),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Whether an agent runs poolers (it has PgBouncer), why not, and where a pooler's published port
-- lies: the database's port plus this offset (0: no poolers).
ALTER TABLE agents ADD COLUMN pooler_port_offset integer NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN pooler_unavailable_reason text NOT NULL DEFAULT 'the agent predates poolers';
