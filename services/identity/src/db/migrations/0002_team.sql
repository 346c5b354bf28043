-- An invitation offers one role in one organization to an e-mail address. Its
-- one-time token is stored only as a SHA-256 digest. Accepted and cancelled
-- invitations are kept (who joined through what), but only pending ones count.
CREATE TABLE invitations (
  id               text PRIMARY KEY,
  organization_id  text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email            text NOT NULL,
  role             text NOT NULL CHECK (role IN ('admin', 'developer', 'viewer')),
  status           text NOT NULL CHECK (status IN ('pending', 'accepted', 'cancelled', 'expired')),
  token_hash       bytea NOT NULL UNIQUE,
  invited_by       text NOT NULL REFERENCES users (id),
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  accepted_by      text REFERENCES users (id),
  finished_at      timestamptz
);
-- One live invitation per address and organization. An invitation past its
-- expires_at stays 'pending' (shown as expired) until a new invitation of the
-- address sets it to 'expired'.
CREATE UNIQUE INDEX invitations_one_pending ON invitations (organization_id, lower(email)) WHERE status = 'pending';
CREATE INDEX invitations_org_idx ON invitations (organization_id, created_at);

-- Mails to send, written in the transaction that makes them necessary and sent
-- by the relay, retried with backoff until the SMTP server accepts them. The
-- body holds a one-time token, so it is sealed (AES-256-GCM) and dropped once sent.
CREATE TABLE mail_outbox (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- RFC 5322 Message-ID, the same on every attempt, so a receiver can drop a
  -- copy re-sent after a crash between the SMTP server's OK and our bookkeeping.
  message_id       text NOT NULL UNIQUE,
  -- A cancelled invitation's unsent mail is withdrawn; a deleted organization's too.
  invitation_id    text REFERENCES invitations (id) ON DELETE CASCADE,
  recipient        text NOT NULL,
  subject          text NOT NULL,
  sealed_body      bytea,
  created_at       timestamptz NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL,
  last_error       text,
  sent_at          timestamptz
);
CREATE INDEX mail_outbox_due_idx ON mail_outbox (next_attempt_at, id) WHERE sent_at IS NULL;
CREATE INDEX mail_outbox_invitation_idx ON mail_outbox (invitation_id);
