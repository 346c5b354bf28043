-- What a status event is about: a database (compute) or a read replica (billed
-- as usage.replicas at its tier's hourly price). Events recorded before
-- replicas existed were all about databases.
ALTER TABLE status_events
  ADD COLUMN kind text NOT NULL DEFAULT 'database' CONSTRAINT status_events_kind CHECK (kind IN ('database', 'replica'));
