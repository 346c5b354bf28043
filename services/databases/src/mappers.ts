import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DATABASE_STATUS } from "@dbaas/catalogue";
import {
  BackupSchema,
  BackupStatus,
  BackupType,
  DatabaseSchema,
  DatabaseStatus,
  HighAvailabilityMemberSchema,
  HighAvailabilitySchema,
  LastFailoverSchema,
  OperationSchema,
  ReplicaSchema,
  RestoredFromSchema,
  type Backup,
  type Database,
  type HighAvailability,
  type Operation,
  type Replica,
} from "@dbaas/proto/databases";
import type { BackupRow } from "./db/backups.ts";
import type { DatabaseRow } from "./db/databases.ts";
import type { OperationRow } from "./db/operations.ts";

/** What every instance has (docs/product.md, Databases): one database and one user. */
export const DATABASE_NAME = "defaultdb";
export const USERNAME = "dbadmin";
/** The password in every connection string but the one create and reset-password answer. */
export const MASK = "********";

export function hostOf(id: string, domain: string): string {
  return `${id}.${domain}`;
}

/** A database's pooler's host name (docs/product.md, Trusted sources and connection pooling). */
export function poolerHost(id: string, domain: string): string {
  return `${id}-pooler.${domain}`;
}

export function connectionString(row: Pick<DatabaseRow, "id" | "port">, domain: string, password: string): string {
  return `postgresql://${USERNAME}:${password}@${hostOf(row.id, domain)}:${row.port}/${DATABASE_NAME}?sslmode=require`;
}

/*
 * The status at the proto boundary, the one place it is converted: stored as
 * its name (statuses.ts), on the wire as DatabaseStatus through the catalogue's one
 * mapping (services/catalogue/src/vocabulary.ts), with the deprecated name beside it for
 * callers that predate the enum.
 */

/** The proto status of a recorded status name. */
export function statusToProto(status: string): DatabaseStatus {
  return DATABASE_STATUS.value(status) ?? DatabaseStatus.UNSPECIFIED;
}

/**
 * The status a request names: its status_enum once set (a number this build
 * does not know stays a name no list holds, refused as any unknown name is),
 * else the deprecated name as given; "" when neither is set.
 */
export function requestedStatus(req: { statusEnum: DatabaseStatus; status: string }): string {
  if (req.statusEnum === DatabaseStatus.UNSPECIFIED) return req.status;
  return DATABASE_STATUS.name(req.statusEnum) ?? String(req.statusEnum);
}

export function toDatabase(row: DatabaseRow, domain: string): Database {
  return create(DatabaseSchema, {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    region: row.region,
    tier: row.tier,
    version: row.version,
    status: row.status,
    statusEnum: statusToProto(row.status),
    host: hostOf(row.id, domain),
    port: row.port,
    database: DATABASE_NAME,
    username: USERNAME,
    connectionString: connectionString(row, domain, MASK),
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
    statusReason: row.status_reason,
    restoredFrom:
      row.restored_from_id && row.restore_time
        ? create(RestoredFromSchema, { databaseId: row.restored_from_id, restoreTime: timestampFromDate(row.restore_time) })
        : undefined,
  });
}

/** A replica row as the API shows it: the primary's database and user, its own host and port. */
export function toReplica(row: DatabaseRow, domain: string): Replica {
  return create(ReplicaSchema, {
    id: row.id,
    name: row.name,
    databaseId: row.primary_id ?? "",
    region: row.region,
    tier: row.tier,
    status: row.status,
    host: hostOf(row.id, domain),
    port: row.port,
    database: DATABASE_NAME,
    username: USERNAME,
    connectionString: connectionString(row, domain, MASK),
    lagBytes: BigInt(row.lag_bytes),
    createdAt: timestampFromDate(row.created_at),
    statusReason: row.status_reason,
  });
}

const BACKUP_TYPE: Record<BackupRow["type"], BackupType> = { scheduled: BackupType.SCHEDULED, manual: BackupType.MANUAL };
const BACKUP_STATUS: Record<BackupRow["status"], BackupStatus> = {
  running: BackupStatus.RUNNING,
  completed: BackupStatus.COMPLETED,
  failed: BackupStatus.FAILED,
};

export function toBackup(row: BackupRow): Backup {
  return create(BackupSchema, {
    id: row.id,
    databaseId: row.database_id,
    type: BACKUP_TYPE[row.type],
    status: BACKUP_STATUS[row.status],
    startedAt: timestampFromDate(row.started_at),
    completedAt: row.completed_at ? timestampFromDate(row.completed_at) : undefined,
    sizeBytes: BigInt(row.size_bytes),
    failureReason: row.failure_reason,
  });
}

export function toOperation(row: OperationRow): Operation {
  return create(OperationSchema, {
    id: row.id,
    databaseId: row.database_id,
    type: row.type,
    status: row.status,
    startedAt: timestampFromDate(row.started_at),
    finishedAt: row.finished_at ? timestampFromDate(row.finished_at) : undefined,
    error: row.error,
    reason: row.reason,
    fromMember: row.from_member,
    toMember: row.to_member,
  });
}

/**
 * How many bytes of WAL a standby trails its primary by: the primary's WAL position minus the standby's, as
 * their agents last reported them (each before every heartbeat: seconds old at most while both are heard from).
 * In asynchronous mode it bounds what a failover now would lose. Before either reported one: 0.
 */
export function standbyLag(
  primary: Pick<DatabaseRow, "wal_position" | "wal_position_at">,
  s: Pick<DatabaseRow, "wal_position" | "wal_position_at">,
): bigint {
  if (primary.wal_position_at === null || s.wal_position_at === null) return 0n;
  const lag = BigInt(primary.wal_position) - BigInt(s.wal_position);
  return lag > 0n ? lag : 0n;
}

/** A highly available database's record: its settings, the primary then the standbys, its last failover. */
export function toHighAvailability(primary: DatabaseRow, standbys: readonly DatabaseRow[]): HighAvailability {
  return create(HighAvailabilitySchema, {
    standbys: primary.ha_standbys,
    synchronous: primary.ha_synchronous,
    members: [
      create(HighAvailabilityMemberSchema, {
        id: primary.node_id ?? primary.id,
        role: "primary",
        status: primary.status,
        region: primary.region,
        lagBytes: 0n,
      }),
      ...standbys.map((s) =>
        create(HighAvailabilityMemberSchema, {
          id: s.id,
          role: "standby",
          status: s.status,
          region: s.region,
          lagBytes: standbyLag(primary, s),
        }),
      ),
    ],
    lastFailover: primary.last_failover_at
      ? create(LastFailoverSchema, {
          at: timestampFromDate(primary.last_failover_at),
          reason: primary.last_failover_reason,
          fromMember: primary.last_failover_from,
          toMember: primary.last_failover_to,
        })
      : undefined,
  });
}
