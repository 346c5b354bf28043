-- Base backups in the blob store, as the databases service asked for them and the agent reported them.
-- Kept while the database is deleted (support's restore uses its data); removed when it is purged.
CREATE TABLE backups (
  id text PRIMARY KEY,
  database_id text NOT NULL REFERENCES databases (id),
  type text NOT NULL CHECK (type IN ('scheduled', 'manual')),
  status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
  started_at timestamptz NOT NULL,
  completed_at timestamptz,
  size_bytes bigint NOT NULL DEFAULT 0,
  failure_reason text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);
-- One backup at a time per database: a concurrent second one fails here (409).
CREATE UNIQUE INDEX backups_one_running ON backups (database_id) WHERE status = 'running';
CREATE INDEX backups_database_started ON backups (database_id, started_at DESC);

-- What the agent last reported of a database's restore window and WAL archiving.
CREATE TABLE restore_windows (
  database_id text PRIMARY KEY REFERENCES databases (id),
  -- Both unset while no backup has completed; latest never moves backwards.
  earliest_restore_time timestamptz,
  latest_restore_time timestamptz,
  -- Why WAL archiving fails, '' while it works.
  archive_error text NOT NULL DEFAULT '',
  spool_bytes bigint NOT NULL DEFAULT 0,
  reported_at timestamptz NOT NULL
);

-- A database created by a restore to a point in time: its source and the instant.
ALTER TABLE databases ADD COLUMN restored_from_id text REFERENCES databases (id);
ALTER TABLE databases ADD COLUMN restore_time timestamptz;

-- A backup's operation is settled by the backup's outcome, not by a spec generation: lifecycle
-- operations neither supersede nor settle it. No foreign key: a pruned backup's row goes, its history stays.
ALTER TABLE operations ADD COLUMN backup_id text;
CREATE INDEX operations_backup ON operations (backup_id) WHERE backup_id IS NOT NULL;
