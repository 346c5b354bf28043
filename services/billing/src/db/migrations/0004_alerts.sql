-- Spending alerts: once per calendar month (UTC), when an organization's
-- month-to-date total reaches the threshold, its members who may read billing
-- are told through the alert's channels.
CREATE TABLE alerts (
  id              text PRIMARY KEY,
  organization_id text NOT NULL,
  threshold       numeric NOT NULL CHECK (threshold > 0),
  currency        text NOT NULL,
  channels        text[] NOT NULL CHECK (cardinality(channels) > 0),
  created_at      timestamptz NOT NULL
);
CREATE INDEX alerts_organization ON alerts (organization_id);

-- The months an alert fired in. The key is what keeps an alert from firing
-- twice in a month, whichever evaluator (replica, retried run) gets there first.
CREATE TABLE alert_firings (
  alert_id text NOT NULL REFERENCES alerts (id),
  -- First day of the month.
  period   date NOT NULL CHECK (extract(day FROM period) = 1),
  -- The month-to-date total that reached the threshold.
  total    numeric NOT NULL,
  fired_at timestamptz NOT NULL,
  PRIMARY KEY (alert_id, period)
);

-- Notices for identity's NotifyOrganization, written in the transaction that
-- records the firing and relayed afterwards, with backoff, until identity
-- accepts one. notification_id is identity's de-duplication key: a notice
-- sent again after a crash between identity's answer and delivered_at is not
-- mailed twice.
CREATE TABLE alert_notifications (
  notification_id text PRIMARY KEY,
  alert_id        text NOT NULL,
  period          date NOT NULL,
  organization_id text NOT NULL,
  subject         text NOT NULL,
  body            text NOT NULL,
  created_at      timestamptz NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  -- When the next attempt is due: after a failure's backoff or, while one is
  -- being sent, when its lease runs out (the relay is presumed dead by then).
  next_attempt_at timestamptz NOT NULL,
  last_error      text,
  delivered_at    timestamptz,
  -- Members identity mailed, as it answered.
  recipients      integer,
  -- Identity no longer knows the organization: nobody is left to tell.
  abandoned_at    timestamptz,
  UNIQUE (alert_id, period),
  FOREIGN KEY (alert_id, period) REFERENCES alert_firings (alert_id, period),
  CHECK (delivered_at IS NULL OR abandoned_at IS NULL)
);
CREATE INDEX alert_notifications_due ON alert_notifications (next_attempt_at)
  WHERE delivered_at IS NULL AND abandoned_at IS NULL;
