-- The W3C trace context (traceparent, tracestate) of the request that last changed what a database's agent
-- is to do, sent to the agent with the spec: the agent's work on that change joins the request's trace.
-- Empty ('{}') when a background job made the change. A database's own changes (lifecycle, credentials)
-- are stored with it, a backup asked for with the backup: the spec carries the later of the two.
ALTER TABLE databases ADD COLUMN trace_context jsonb NOT NULL DEFAULT '{}';
ALTER TABLE databases ADD COLUMN trace_context_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE backups ADD COLUMN trace_context jsonb NOT NULL DEFAULT '{}';
