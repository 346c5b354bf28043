-- Removed spending alerts stay as rows, since their firings and notices refer
-- to them, but are neither listed, counted against the cap, nor fired.
ALTER TABLE alerts ADD COLUMN removed_at timestamptz;

-- Removed payment methods stay as rows, since charge attempts refer to them,
-- but are neither listed nor charged; a removed method is never the default.
-- detached_at: when the processor confirmed it no longer holds the
-- instrument for the customer. The removal is committed first and the
-- processor told afterwards, so a removed method not yet detached is retried
-- in the background until it is.
ALTER TABLE payment_methods
  ADD COLUMN removed_at  timestamptz,
  ADD COLUMN detached_at timestamptz,
  ADD CONSTRAINT payment_methods_removed_not_default CHECK (removed_at IS NULL OR NOT is_default),
  ADD CONSTRAINT payment_methods_detached_removed CHECK (detached_at IS NULL OR removed_at IS NOT NULL);
CREATE INDEX payment_methods_to_detach ON payment_methods (removed_at) WHERE removed_at IS NOT NULL AND detached_at IS NULL;
