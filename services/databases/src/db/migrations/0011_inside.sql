-- Where the databases service reaches an agent's InstanceAdminService (AGENT_CONTROL_URL): roles,
-- logical databases, extensions, logs and query statistics of its instances. Empty for an agent
-- that predates the field (those calls answer 503 until it registers again).
ALTER TABLE agents ADD COLUMN control_url text NOT NULL DEFAULT '';

-- Roles made through the API, by name: when they were made (PostgreSQL keeps no such time). The
-- server is the truth about which roles exist; a row without its role is ignored, a role without a
-- row (made in SQL, or dbadmin) has no creation time. Never a password or a verifier.
CREATE TABLE database_roles (
  database_id text NOT NULL REFERENCES databases (id),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (database_id, name)
);
