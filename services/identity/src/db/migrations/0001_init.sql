CREATE TABLE users (
  id            text PRIMARY KEY,
  email         text NOT NULL,
  name          text NOT NULL,
  password_hash text NOT NULL,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL
);
-- E-mail addresses are compared case-insensitively; the address is kept as typed.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE organizations (
  id         text PRIMARY KEY,
  name       text NOT NULL,
  plan       text NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

CREATE TABLE memberships (
  id              text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role            text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
  created_at      timestamptz NOT NULL,
  UNIQUE (organization_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id, created_at);
CREATE UNIQUE INDEX memberships_one_owner ON memberships (organization_id) WHERE role = 'owner';

-- A login token acts through one membership: removing the member deletes its
-- sessions, so re-inviting the same user later does not revive old tokens.
CREATE TABLE sessions (
  id            text PRIMARY KEY,
  membership_id text NOT NULL REFERENCES memberships (id) ON DELETE CASCADE,
  token_hash    bytea NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL
);
CREATE INDEX sessions_membership_idx ON sessions (membership_id);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

-- An API key belongs to the organization, not to the membership: it outlives
-- its creator's removal, bounded by the role the creator had when creating it.
CREATE TABLE api_keys (
  id              text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  created_by      text NOT NULL REFERENCES users (id),
  role            text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
  name            text NOT NULL,
  scopes          text[] NOT NULL,
  prefix          text NOT NULL,
  secret_hash     bytea NOT NULL UNIQUE,
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz,
  revoked_at      timestamptz
);
CREATE INDEX api_keys_org_idx ON api_keys (organization_id, created_at);

-- Failed logins per (lower-cased) e-mail, for the brute-force lockout.
CREATE TABLE login_failures (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email     text NOT NULL,
  failed_at timestamptz NOT NULL
);
CREATE INDEX login_failures_email_idx ON login_failures (email, failed_at);
CREATE INDEX login_failures_failed_at_idx ON login_failures (failed_at);
