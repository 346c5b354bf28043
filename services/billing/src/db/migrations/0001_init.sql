-- Database status changes as delivered by the databases service's outbox.
-- Delivery is at-least-once and unordered: event_id de-duplicates, and usage is
-- computed from occurred_at, never from arrival order.
CREATE TABLE status_events (
  event_id        text PRIMARY KEY,
  -- Arrival order; only breaks ties between events of the same instant.
  seq             bigint GENERATED ALWAYS AS IDENTITY,
  organization_id text NOT NULL,
  database_id     text NOT NULL,
  tier            text NOT NULL,
  status          text NOT NULL,
  occurred_at     timestamptz NOT NULL,
  recorded_at     timestamptz NOT NULL DEFAULT now()
);

-- Usage reads, per organization, each database's last event before the period
-- (DISTINCT ON database_id) and then the events inside the period.
CREATE INDEX status_events_org_db_time ON status_events (organization_id, database_id, occurred_at, seq);
CREATE INDEX status_events_org_time ON status_events (organization_id, occurred_at);
