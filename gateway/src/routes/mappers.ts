import { create } from "@bufbuild/protobuf";
import { TimestampSchema, timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  DATABASE_STATUS,
  PLAN,
  ROLE,
  vocabulary,
  type DatabaseStatusName,
  type PlanName,
  type RoleName,
  type Vocabulary,
} from "@dbaas/catalogue";
import { BackupStatusSchema, BackupTypeSchema, type BackupStatus, type BackupType, type DatabaseStatus } from "@dbaas/proto/databases";
import type { Plan, Principal, Role } from "@dbaas/proto/identity";
import { list, type Reply } from "../middleware/envelope.ts";
import { pagination, type QueryValues } from "../schema.ts";

/** ISO 8601 UTC, or null for an unset timestamp. */
export function iso(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

/**
 * The instant an RFC 3339 timestamp names (the request schema checked its
 * form), to the nanosecond: `Date` keeps milliseconds, and a restore to
 * 10:00:00.000123 must not become one to 10:00:00.000.
 */
export function timestampOf(rfc3339: string): Timestamp {
  const ms = Date.parse(rfc3339);
  const fraction = /\.(\d+)/.exec(rfc3339)?.[1] ?? "";
  return create(TimestampSchema, {
    seconds: BigInt(Math.floor(ms / 1000)),
    nanos: Number(fraction.slice(0, 9).padEnd(9, "0")),
  });
}

/** A message field the upstream contract promises; its absence is the upstream's bug, a 500. */
export function present<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`upstream response lacks ${what}`);
  return value;
}

/**
 * The requested page of a list the upstream answers whole (an organization
 * has few members, keys, payment methods, invoices): cut here, each item mapped.
 */
export function pageOf<T>(name: string, all: readonly T[], query: QueryValues, map: (item: T) => unknown): Reply {
  const { page, perPage } = pagination(query);
  return list(name, all.slice((page - 1) * perPage, page * perPage).map(map), { page, perPage, total: all.length });
}

/** Empty strings are proto3's "unset"; the public API says null. */
export const orNull = (s: string): string | null => (s === "" ? null : s);

/*
 * The vocabularies that cross the wire as proto enums (role, plan, database
 * status) become the public JSON's strings here and nowhere else, through the
 * catalogue's one mapping (services/catalogue/src/vocabulary.ts); the strings are the
 * catalogue's, so the JSON is exactly what it was. A value the upstream sends
 * that this build has no name for is the upstream's bug, a 500, never a string
 * the OpenAPI document does not list.
 */

const nameOf = <E extends number, N extends string>(vocab: Vocabulary<E, N>, value: E, deprecatedName: string, what: string): N =>
  present(vocab.read(value, deprecatedName), `a known ${what} (got ${value}, "${deprecatedName}")`);

/** The public name of a role (docs/product.md, Roles and permissions). */
export const roleName = (role: Role): RoleName => nameOf(ROLE, role, "", "role");

/** The public name of an organization's or a principal's plan. */
export const planName = (m: { planEnum: Plan; plan: string }): PlanName => nameOf(PLAN, m.planEnum, m.plan, "plan");

/** A principal's plan, which sets its rate limits; undefined when it names none this build knows. */
export const principalPlan = (principal: Principal): PlanName | undefined => PLAN.read(principal.planEnum, principal.plan);

/** The public name of a database's status. */
export const databaseStatusName = (db: { statusEnum: DatabaseStatus; status: string }): DatabaseStatusName =>
  nameOf(DATABASE_STATUS, db.statusEnum, db.status, "database status");

/** A backup's type, by the names of docs/product.md (Backups and point-in-time restore; the catalogue has no list of them: only the gateway names them). */
export const BACKUP_TYPE = vocabulary<BackupType, "scheduled" | "manual">(BackupTypeSchema, ["scheduled", "manual"]);

/** A backup's status. */
export const BACKUP_STATUS = vocabulary<BackupStatus, "running" | "completed" | "failed">(BackupStatusSchema, [
  "running",
  "completed",
  "failed",
]);

export const backupTypeName = (type: BackupType) => nameOf(BACKUP_TYPE, type, "", "backup type");

export const backupStatusName = (status: BackupStatus) => nameOf(BACKUP_STATUS, status, "", "backup status");

/*
 * The request fields of a name the request schema admitted: the enum, and the
 * deprecated name beside it for a service that predates the enum (every
 * writer sets both until the names are retired; readers take the enum).
 */

export const roleFields = (name: RoleName) => ({ roleEnum: ROLE.value(name)!, role: name });

export const planFields = (name: PlanName) => ({ planEnum: PLAN.value(name)!, plan: name });

export const databaseStatusFields = (name: DatabaseStatusName) => ({ statusEnum: DATABASE_STATUS.value(name)!, status: name });

/**
 * Who is asking, as identity judges every change made for an end user: the
 * user, the credential's role (an API key's is its creator's when it was
 * made) and the credential's effective permissions (a key restricted to
 * `databases:read` must not mint a broader one or change the plan).
 */
export const actorOf = (principal: Principal) => ({
  userId: principal.userId,
  role: principal.role,
  permissions: principal.permissions,
});

/**
 * What a replica's status can be (databases_service.proto, Replica.status):
 * a database's lifecycle without restarting and resizing, which a replica
 * never goes through (a resize or restart of its primary leaves it alone).
 */
export const REPLICA_STATUSES = ["provisioning", "running", "starting", "stopping", "stopped", "failed"] as const;

export type ReplicaStatusName = (typeof REPLICA_STATUSES)[number];

/** A replica's public status; one this build does not list is the upstream's bug, a 500. */
export function replicaStatusName(status: string): ReplicaStatusName {
  const known = REPLICA_STATUSES.find((s) => s === status);
  return present(known, `a known replica status (got "${status}")`);
}

/**
 * What an operation's type can be: what the databases service records on a
 * database (services/databases: a change's name, `backup`, `wal_archive`,
 * `storage_full` / `storage_ok`, `failover` and `standby_replaced` on a
 * highly available one, and
 * `promote` on the database a promoted replica became). One this build does
 * not list is the upstream's bug, a 500, never a string the document lacks.
 */
export const OPERATION_TYPES = [
  "create",
  "start",
  "stop",
  "restart",
  "resize",
  "delete",
  "restore",
  "promote",
  "backup",
  "wal_archive",
  "storage_full",
  "storage_ok",
  "failover",
  "standby_replaced",
] as const;

/** A high availability member's status: a database status by name (the service sends names, as for replicas). */
export function memberStatusName(status: string): DatabaseStatusName {
  return present(
    DATABASE_STATUS.names.find((s) => s === status),
    `a known member status (got "${status}")`,
  );
}

/** A high availability member's role. */
export const HA_MEMBER_ROLES = ["primary", "standby"] as const;

export function haMemberRole(role: string): (typeof HA_MEMBER_ROLES)[number] {
  return present(
    HA_MEMBER_ROLES.find((r) => r === role),
    `a known member role (got "${role}")`,
  );
}

export function operationTypeName(type: string): (typeof OPERATION_TYPES)[number] {
  return present(
    OPERATION_TYPES.find((t) => t === type),
    `a known operation type (got "${type}")`,
  );
}

/** An operation's status. */
export const OPERATION_STATUSES = ["running", "succeeded", "failed"] as const;

export function operationStatusName(status: string): (typeof OPERATION_STATUSES)[number] {
  return present(
    OPERATION_STATUSES.find((s) => s === status),
    `a known operation status (got "${status}")`,
  );
}
