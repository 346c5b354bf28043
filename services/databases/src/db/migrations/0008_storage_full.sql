-- Storage per tier (#20). Written as 0007_storage_full.sql on its branch and renumbered after 0007_dns_records.sql
-- at the merge; IF NOT EXISTS lets a schema that applied it under the old name (schema_migrations records file
-- names) apply it again harmlessly.
-- Storage per tier (#20): a database at 100 % of its tier's storage is made read-only by its agent until it is
-- below 95 % again (or resized to a larger tier). `storage_full` is what the spec carries to the agent.
ALTER TABLE databases ADD COLUMN IF NOT EXISTS storage_full boolean NOT NULL DEFAULT false;
-- The owners' and admins' mail about a storage_full / storage_ok operation: sent through identity's
-- NotifyOrganization with the operation's id as notification id (identity mails each id once), then marked here.
ALTER TABLE operations ADD COLUMN IF NOT EXISTS notify_pending boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS operations_notify_pending ON operations (started_at) WHERE notify_pending;
-- What a storage operation measured ("61.2 MB of the micro tier's 60.0 MB"), for its mail.
ALTER TABLE operations ADD COLUMN IF NOT EXISTS detail text NOT NULL DEFAULT '';
