/**
 * Where a database's backups live in the blob store. One prefix per database
 * id, so a restore on any agent finds a source's backups by id alone, and a
 * purge removes `<id>/` as a whole.
 *
 *   <id>/wal/<walfile>.gz            an archived WAL segment, `.history` or `.partial` file, gzip
 *   <id>/base/<bkp>/base.tar.gz      the base backup's tar (BASE_BACKUP), gzip
 *   <id>/base/<bkp>/backup_manifest  its manifest
 *   <id>/base/<bkp>/backup.json      BackupRecord; written LAST: its presence means "completed"
 */

export interface BackupRecord {
  backupId: string;
  databaseId: string;
  /** PostgreSQL major version of the data. */
  version: string;
  /** BASE_BACKUP's start and end WAL positions ("0/3000028") and timeline. */
  startLsn: string;
  stopLsn: string;
  timeline: number;
  /** ISO 8601. The backup is consistent (restorable) from `stoppedAt` on. */
  startedAt: string;
  stoppedAt: string;
  /** Compressed bytes of base.tar.gz + manifest. */
  sizeBytes: number;
}

export const walPrefix = (databaseId: string) => `${databaseId}/wal/`;
export const walKey = (databaseId: string, walFile: string) => `${databaseId}/wal/${walFile}.gz`;
export const basePrefix = (databaseId: string) => `${databaseId}/base/`;
export const baseTarKey = (databaseId: string, backupId: string) => `${databaseId}/base/${backupId}/base.tar.gz`;
export const manifestKey = (databaseId: string, backupId: string) => `${databaseId}/base/${backupId}/backup_manifest`;
export const recordKey = (databaseId: string, backupId: string) => `${databaseId}/base/${backupId}/backup.json`;
export const databasePrefix = (databaseId: string) => `${databaseId}/`;
