import { DATABASE_STATUSES, REGIONS, TIERS } from "@dbaas/catalogue";
import type {
  Backup,
  CreateDatabaseResponse,
  Database,
  GetMetricsResponse,
  HighAvailability,
  HighAvailabilityMember,
  LastFailover,
  ListBackupsResponse,
  ListRegionsResponse,
  ListTiersResponse,
  ListVersionsResponse,
  Metric,
  MetricSeries,
  Operation,
  Pooler,
  Region,
  Replica,
  ResetPasswordResponse,
  RestoredFrom,
  Tier,
  TrustedSource,
  Version,
} from "@dbaas/proto/databases";
import {
  BACKUP_STATUS,
  BACKUP_TYPE,
  backupStatusName,
  backupTypeName,
  databaseStatusName,
  HA_MEMBER_ROLES,
  haMemberRole,
  iso,
  memberStatusName,
  OPERATION_STATUSES,
  OPERATION_TYPES,
  operationStatusName,
  operationTypeName,
  orNull,
  present,
  REPLICA_STATUSES,
  replicaStatusName,
} from "./mappers.ts";
import {
  arrayOf,
  constant,
  dateTime,
  field,
  fieldsOf,
  id,
  int,
  type JsonSchema,
  num,
  nullableDateTime,
  oneOf,
  optional,
  record,
  ref,
  str,
  titled,
} from "./record.ts";
import {
  ACCEPTANCE,
  API_KEY,
  CREATED_API_KEY,
  INVITATION,
  MEMBER,
  ORGANIZATION,
  SIGNUP,
  TOKEN,
  TRANSFER,
  USER,
} from "./responses-identity.ts";
import { ALERT, INVOICE, PAYMENT_METHOD, USAGE } from "./responses-billing.ts";
import { INSIDE_SCHEMAS } from "./responses-inside.ts";

export type { JsonSchema } from "./record.ts";

/*
 * The records each route puts in `data` (record.ts: each field's schema and
 * how it is read from the upstream's message, declared once), and the index of
 * their JSON Schemas (2020-12, as OpenAPI 3.1 uses) by the names the route
 * table gives them. Every object is closed (`additionalProperties: false`)
 * and names every field it always carries as required, so the end-to-end
 * tests, which validate every response against the published document, fail
 * on a field the document does not know or one a mapper forgot.
 */

const region = oneOf(
  REGIONS.map((r) => r.code),
  "Region code.",
);
const tier = oneOf(
  TIERS.map((t) => t.name),
  "Instance tier.",
);
const version = { type: "string", pattern: "^[0-9]+$", description: "PostgreSQL major version." };
const databaseStatus = oneOf(DATABASE_STATUSES, "Lifecycle status.");

/** A proto int64 (a bigint) as the JSON number the answers carry. */
const int64 = (description: string): JsonSchema => ({ type: "integer", format: "int64", minimum: 0, description });

// ---- Databases ----

export const RESTORED_FROM = record<RestoredFrom>("The database and the instant a restored database was made from.")({
  database_id: field(id("db-"), (from) => from.databaseId),
  restore_time: field(dateTime("It holds exactly the transactions committed up to this instant."), (from) =>
    iso(present(from.restoreTime, "restored_from.restore_time")),
  ),
});

/** Where a restored database came from; undefined for every other database. */
const restoredFrom = (db: Database) =>
  db.restoredFrom === undefined || db.restoredFrom.databaseId === "" ? undefined : RESTORED_FROM.map(db.restoredFrom);

/**
 * The full record of GET and PATCH (and of a promoted replica, which answers
 * exactly as GET then shows it): the connection string arrives masked, and no
 * password exists here. The product serves PostgreSQL only; `type` says so
 * because clients of multi-engine services expect the field.
 */
export const DATABASE = record<Database>("A database as GET and PATCH return it: the connection string's password masked.")({
  id: field(id("db-"), (db) => db.id),
  name: field(str("3-63 characters."), (db) => db.name),
  type: constant("postgres"),
  region: field(region, (db) => db.region),
  tier: field(tier, (db) => db.tier),
  version: field(version, (db) => db.version),
  status: field(databaseStatus, databaseStatusName),
  status_reason: optional(str("Why the database is `failed`; absent otherwise."), (db) => db.statusReason),
  host: field(str("`<id>.<database domain>`."), (db) => db.host),
  port: field(int(), (db) => db.port),
  database: field(str(), (db) => db.database),
  username: field(str(), (db) => db.username),
  connection_string: field(
    str("`postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`."),
    (db) => db.connectionString,
  ),
  created_at: field(dateTime(), (db) => iso(db.createdAt)),
  updated_at: field(dateTime(), (db) => iso(db.updatedAt)),
  restored_from: optional(
    { ...ref("RestoredFrom"), description: "Set on a database made by `POST /v1/databases/{id}/restore`; absent otherwise." },
    restoredFrom,
  ),
});

/**
 * docs/product.md, Databases: "List items carry only id, name, region, tier,
 * version, status, created_at" — a restored database's `restored_from` is on
 * its full record (GET), not here.
 */
export const DATABASE_LIST_ITEM = record<Database>("A database as lists show it: exactly these fields.")({
  id: field(id("db-"), (db) => db.id),
  name: field(str(), (db) => db.name),
  region: field(region, (db) => db.region),
  tier: field(tier, (db) => db.tier),
  version: field(version, (db) => db.version),
  status: field(databaseStatus, databaseStatusName),
  created_at: field(dateTime(), (db) => iso(db.createdAt)),
});

/** What create and restore answer (a RestoreToTimeResponse has the same fields). */
type NewDatabase = Pick<CreateDatabaseResponse, "database" | "password" | "connectionString">;

const newDb = (res: NewDatabase) => present(res.database, "database");

/**
 * A new database as create (and restore, which adds `restored_from`) answers:
 * the only response besides reset-password that carries the password, in the clear.
 */
const NEW_DATABASE = fieldsOf<NewDatabase>()({
  id: field(id("db-"), (res) => newDb(res).id),
  name: field(str(), (res) => newDb(res).name),
  type: constant("postgres"),
  region: field(region, (res) => newDb(res).region),
  tier: field(tier, (res) => newDb(res).tier),
  version: field(version, (res) => newDb(res).version),
  status: field(databaseStatus, (res) => databaseStatusName(newDb(res))),
  host: field(str(), (res) => newDb(res).host),
  port: field(int(), (res) => newDb(res).port),
  database: field(str(), (res) => newDb(res).database),
  username: field(str(), (res) => newDb(res).username),
  password: field(str(), (res) => res.password),
  connection_string: field(str("With the password in clear."), (res) => res.connectionString),
  created_at: field(dateTime(), (res) => iso(newDb(res).createdAt)),
});

export const CREATED_DATABASE = record<NewDatabase>("A new database, with its password: shown this once.")(NEW_DATABASE.fields);

export const RESTORED_DATABASE = record<NewDatabase>("A new database restored from another's backups, with its password: shown this once.")(
  {
    ...NEW_DATABASE.fields,
    restored_from: field(ref("RestoredFrom"), (res) => present(restoredFrom(newDb(res)), "database.restored_from")),
  },
);

/** What start, stop and restart answer. */
export const DATABASE_STATUS = record<Database>("The database's status after start, stop or restart was accepted.")({
  id: field(id("db-"), (db) => db.id),
  status: field(databaseStatus, databaseStatusName),
});

export const RESIZED_DATABASE = record<Database>("The database's new tier and status after a resize was accepted.")({
  id: field(id("db-"), (db) => db.id),
  tier: field(tier, (db) => db.tier),
  status: field(databaseStatus, databaseStatusName),
});

export const CREDENTIALS = record<ResetPasswordResponse>("New credentials; the previous password no longer works.")({
  password: field(str(), (res) => res.password),
  connection_string: field(str("With the password in clear."), (res) => res.connectionString),
});

/** An operation; a failover's and a standby replacement's also say why and which members (`from`, `to`). */
export const OPERATION = record<Operation>("One operation run on a database.")({
  id: field(id("op-"), (op) => op.id),
  type: field(
    oneOf(
      OPERATION_TYPES,
      "`restore`: a deleted database brought back, or a database made from another's backups; " +
        "`promote`: the database a promoted read replica became; " +
        "`backup`: a base backup; `wal_archive`: WAL archiving started failing (failed, with why) or resumed (succeeded); " +
        "`storage_full`: the database reached its tier's storage and was made read-only (a session may still " +
        "`SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE` to delete data); `storage_ok`: below 95 % again, writable; " +
        "`failover`: a standby promoted, automatically or by a planned switchover (succeeded once it runs as the primary); " +
        "`standby_replaced`: a standby whose host was not heard from for too long retired, and a replacement placed on another host " +
        "(at once, or once one can take it).",
    ),
    (op) => operationTypeName(op.type),
  ),
  status: field(oneOf(OPERATION_STATUSES), (op) => operationStatusName(op.status)),
  started_at: field(dateTime(), (op) => iso(op.startedAt)),
  finished_at: field(nullableDateTime("Null while running."), (op) => iso(op.finishedAt)),
  error: field({ type: ["string", "null"], description: "Why it failed; null otherwise." }, (op) => orNull(op.error)),
  reason: optional(
    str(
      "A `failover`'s and a `standby_replaced`'s only: why it happened (the lost lease, the failed server or a planned " +
        "switchover; the standby's silent host) and what became of the old primary's data (where the replacement went).",
    ),
    (op) => (op.type === "failover" || op.type === "standby_replaced" ? op.reason : undefined),
  ),
  from: optional(str("A `failover`'s: the member that was the primary (`node-…`); a `standby_replaced`'s: the standby retired."), (op) =>
    op.type === "failover" || op.type === "standby_replaced" ? op.fromMember : undefined,
  ),
  to: optional(
    str(
      "A `failover`'s: the standby promoted (`node-…`), the primary from then on; a `standby_replaced`'s: its replacement, " +
        "once placed (absent until then).",
    ),
    (op) => (op.type === "failover" || (op.type === "standby_replaced" && op.toMember !== "") ? op.toMember : undefined),
  ),
});

// ---- The catalogue ----

const REGION = record<Region>("A region.")({
  code: field(region, (r) => r.code),
  name: field(str("Location."), (r) => r.name),
});

export const REGIONS_LIST = record<ListRegionsResponse>("Regions a database can be created in.")({
  regions: field(arrayOf(titled("Region", REGION.schema)), (res) => res.regions.map(REGION.map)),
});

const TIER = record<Tier>("A tier.")({
  name: field(tier, (t) => t.name),
  vcpu: field(int(), (t) => t.vcpu),
  memory_gb: field(num(), (t) => t.memoryGb),
  storage_gb: field(num(), (t) => t.storageGb),
  hourly_price: field(num("USD per hour while running."), (t) => t.hourlyPrice),
});

export const TIERS_LIST = record<ListTiersResponse>("Instance tiers.")({
  tiers: field(arrayOf(titled("Tier", TIER.schema)), (res) => res.tiers.map(TIER.map)),
});

const VERSION = record<Version>("A version.")({
  version: field(version, (v) => v.version),
  default: field({ type: "boolean" }, (v) => v.isDefault),
});

export const VERSIONS_LIST = record<ListVersionsResponse>("PostgreSQL versions.")({
  versions: field(arrayOf(titled("Version", VERSION.schema)), (res) => res.versions.map(VERSION.map)),
});

// ---- Backups ----

export const BACKUP = record<Backup>("A base backup of a database.")({
  id: field(id("bkp-"), (b) => b.id),
  type: field(oneOf(BACKUP_TYPE.names, "`scheduled`: daily (and the first, when the database first ran); `manual`: asked for."), (b) =>
    backupTypeName(b.type),
  ),
  status: field(oneOf(BACKUP_STATUS.names, "`completed`: stored with the WAL it needs, usable for a restore."), (b) =>
    backupStatusName(b.status),
  ),
  started_at: field(dateTime(), (b) => iso(present(b.startedAt, "backup.started_at"))),
  completed_at: field(nullableDateTime("When it completed or failed; null while running."), (b) => iso(b.completedAt)),
  size_bytes: field(int64("Compressed bytes stored; 0 until completed."), (b) => Number(b.sizeBytes)),
  failure_reason: field({ type: ["string", "null"], description: "Why it failed; null otherwise." }, (b) => orNull(b.failureReason)),
});

export const WAL_ARCHIVING = record<ListBackupsResponse>(
  "Whether the database's WAL reaches the backup store: what keeps the restore window moving.",
)({
  status: field(oneOf(["healthy", "failing"]), (res) => (res.archiveError === "" ? "healthy" : "failing")),
  error: field(
    { type: ["string", "null"], description: "Why archiving is failing (store unreachable, spool full); null while healthy." },
    (res) => orNull(res.archiveError),
  ),
});

/** What the list of backups carries beside them: the restore window and whether WAL archiving keeps it moving. */
export const RESTORE_WINDOW = fieldsOf<ListBackupsResponse>()({
  earliest_restore_time: field(nullableDateTime("The earliest instant a restore can reach; null until a backup completed."), (res) =>
    iso(res.earliestRestoreTime),
  ),
  latest_restore_time: field(
    nullableDateTime("The latest instant a restore can reach (within 90 s of now while archiving is healthy)."),
    (res) => iso(res.latestRestoreTime),
  ),
  wal_archiving: field(ref("WalArchiving"), WAL_ARCHIVING.map),
});

// ---- Trusted sources and the pooler ----

export const TRUSTED_SOURCE = record<TrustedSource>("An address range allowed to connect to a database, its pooler and its replicas.", {
  examples: [{ id: "ts-4b8r2k9q", cidr: "203.0.113.0/24", description: "office", expires_at: null, created_at: "2026-01-05T10:00:00Z" }],
})({
  id: field(id("ts-"), (t) => t.id),
  cidr: field(str("IPv4 or IPv6 network in CIDR form, normalized (`203.0.113.0/24`, `198.51.100.7/32`, `2001:db8::/32`)."), (t) => t.cidr),
  description: field(str("What the entry is for; empty when none was given."), (t) => t.description),
  expires_at: field(nullableDateTime("When the entry stops admitting and leaves the list; null: never."), (t) => iso(t.expiresAt)),
  created_at: field(dateTime(), (t) => iso(t.createdAt)),
});

/** The pooler's address, absent where its host cannot run one (`reason` says why). */
const poolerAddress =
  <V>(read: (p: Pooler) => V) =>
  (p: Pooler) =>
    p.host === "" ? undefined : read(p);

export const POOLER = record<Pooler>(
  "A database's connection pooler (PgBouncer) with its own host name and port; the database's username and password log in.",
  {
    examples: [
      {
        enabled: true,
        mode: "transaction",
        pool_size: 20,
        max_client_connections: 1000,
        host: "db-3f9a1c2e-pooler.db.example.com",
        port: 16400,
        connection_string: "postgresql://dbadmin:********@db-3f9a1c2e-pooler.db.example.com:16400/defaultdb?sslmode=require",
      },
    ],
  },
)({
  enabled: field(
    { type: "boolean", description: "Whether the pooler runs (false where its host cannot run one: see `reason`)." },
    (p) => p.enabled,
  ),
  mode: field(oneOf(["transaction", "session"], "Pool mode: `transaction` (default) or `session`."), (p) => p.mode),
  pool_size: field(int("Server connections per database and user."), (p) => p.poolSize),
  max_client_connections: field(int("Client connections the pooler accepts at once."), (p) => p.maxClientConnections),
  host: optional(
    str("`<database id>-pooler.<database domain>`: its certificate's name (sslmode=verify-full with the CA certificate)."),
    poolerAddress((p) => p.host),
  ),
  port: optional(
    int(),
    poolerAddress((p) => p.port),
  ),
  connection_string: optional(
    str("`postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`."),
    poolerAddress((p) => p.connectionString),
  ),
  reason: optional(str("Why there is no pooler; absent when there can be one."), (p) => p.reason),
});

// ---- Read replicas ----

/** A replica as every route shows it: the primary's credentials work, so no password of its own exists. */
export const REPLICA = record<Replica>(
  "A read replica of a database: a hot standby streaming from it, read-only, reached with the database's own username and password.",
  {
    examples: [
      {
        id: "rep-8k2m4q7x",
        name: "reports",
        database_id: "db-3f9a1c2e",
        region: REGIONS[0]?.code,
        tier: TIERS[0]?.name,
        status: "running",
        host: "rep-8k2m4q7x.db.example.com",
        port: 5432,
        database: "defaultdb",
        username: "dbadmin",
        connection_string: "postgresql://dbadmin:********@rep-8k2m4q7x.db.example.com:5432/defaultdb?sslmode=require",
        lag_bytes: 0,
        created_at: "2026-01-05T10:00:00Z",
      },
    ],
  },
)({
  id: field(id("rep-"), (r) => r.id),
  name: field(str("3-63 characters."), (r) => r.name),
  database_id: field({ ...id("db-"), description: "The primary: the database the replica follows." }, (r) => r.databaseId),
  region: field(region, (r) => r.region),
  tier: field(tier, (r) => r.tier),
  status: field(oneOf(REPLICA_STATUSES, "Lifecycle status; it follows the primary's stops and starts."), (r) =>
    replicaStatusName(r.status),
  ),
  status_reason: optional(str("Why the replica is `failed`; absent otherwise."), (r) => r.statusReason),
  host: field(str("`<id>.<database domain>`."), (r) => r.host),
  port: field(int(), (r) => r.port),
  database: field(str("The primary's database."), (r) => r.database),
  username: field(str("The primary's username; its password works here too."), (r) => r.username),
  connection_string: field(str("`postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`."), (r) => r.connectionString),
  lag_bytes: field(int64("Bytes of WAL not yet replayed, as last measured; 0 until measured."), (r) => Number(r.lagBytes)),
  created_at: field(dateTime(), (r) => iso(r.createdAt)),
});

// ---- Metrics ----

/**
 * A series' points as [unix_seconds, value] pairs, from the packed columns; a databases service from
 * before them (during a rolling deploy) sends MetricPoint messages instead, read as they come.
 */
function pointsOf(s: MetricSeries): Array<[number, number]> {
  if (s.unixSeconds.length === 0) return s.points.map((p) => [Number(p.unixSeconds), p.value]);
  return s.unixSeconds.map((t, i) => [Number(t), s.values[i]!]);
}

export const METRIC_SERIES = record<MetricSeries>("The points of one label set; a bucket without samples has no point.")({
  labels: field(
    {
      type: "object",
      additionalProperties: { type: "string" },
      description:
        "`state` (connections): active, idle, idle_in_transaction; `op` (rows_per_second): fetched, inserted, updated, deleted; `direction` (network_bytes_per_second): in, out; `replica` (replication_lag_bytes): the replica's id.",
    },
    (s) => ({ ...s.labels }),
  ),
  points: field(
    arrayOf({
      type: "array",
      title: "Point",
      prefixItems: [int("Unix seconds: the bucket's start."), num()],
      minItems: 2,
      maxItems: 2,
    }),
    pointsOf,
  ),
});

export const METRIC = record<Metric>("One metric: its series, one per label set.")({
  name: field(
    str(
      "cpu_percent, memory_bytes, storage_bytes, connections, transactions_per_second, rows_per_second, cache_hit_ratio, deadlocks, network_bytes_per_second, replication_lag_bytes or wal_archive_lag_seconds.",
    ),
    (m) => m.name,
  ),
  unit: field(str(), (m) => m.unit),
  series: field(arrayOf(ref("MetricSeries")), (m) => m.series.map(METRIC_SERIES.map)),
});

/** A database's metrics, one point per step bucket that has data (a bucket without samples has no point, never a null). */
export const METRICS = record<GetMetricsResponse>("A database's metrics.")({
  start: field(dateTime(), (res) => iso(present(res.start, "start"))),
  end: field(dateTime(), (res) => iso(present(res.end, "end"))),
  step: field(int("Seconds between points."), (res) => res.stepSeconds),
  metrics: field(arrayOf(ref("Metric")), (res) => res.metrics.map(METRIC.map)),
});

// ---- High availability ----

const HA_MEMBER = record<HighAvailabilityMember>("One server of the database: the primary first, then the standbys, oldest first.")({
  id: field(id("node-"), (m) => m.id),
  role: field(
    oneOf(HA_MEMBER_ROLES, "The primary takes the connections; a standby streams from it and is not reachable by clients."),
    (m) => haMemberRole(m.role),
  ),
  status: field(databaseStatus, (m) => memberStatusName(m.status)),
  region: field(region, (m) => m.region),
  lag_bytes: field(int64("A standby's WAL not yet replayed, as last measured; 0 for the primary."), (m) => Number(m.lagBytes)),
});

const LAST_FAILOVER = record<LastFailover>("The last failover or switchover; null before the first.")({
  at: field(dateTime(), (f) => iso(f.at)),
  reason: field(str("Why it happened."), (f) => f.reason),
  from: field(str("The member that was the primary."), (f) => f.fromMember),
  to: field(str("The standby promoted."), (f) => f.toMember),
});

/** The record as every route shows it: the primary first, then the standbys. */
export const HIGH_AVAILABILITY = record<HighAvailability>(
  "A database's high availability: its standbys (streaming replicas on other hosts of its region, promoted automatically when the primary is lost) and their mode, its members now, and its last failover.",
  {
    examples: [
      {
        standbys: 1,
        synchronous: true,
        members: [
          { id: "node-2k7x9m4q1a8c3e5f", role: "primary", status: "running", region: REGIONS[0]?.code, lag_bytes: 0 },
          { id: "node-8h3j5n2p7r4t6v1w", role: "standby", status: "running", region: REGIONS[0]?.code, lag_bytes: 0 },
        ],
        last_failover: {
          at: "2026-01-05T10:00:12Z",
          reason:
            "agent-fsn1 stopped renewing the primary's lease (it ended 2026-01-05T10:00:00.000Z); promoted the standby with the most WAL (50331648 bytes, synchronous mode)",
          from: "node-5d1f7g3h9k2m4n6p",
          to: "node-2k7x9m4q1a8c3e5f",
        },
      },
    ],
  },
)({
  standbys: field({ type: "integer", minimum: 0, maximum: 2, description: "Standbys kept." }, (ha) => ha.standbys),
  synchronous: field(
    {
      type: "boolean",
      description: "Whether a commit returns only once a standby has its WAL (no acknowledged commit lost on failover).",
    },
    (ha) => ha.synchronous,
  ),
  members: field(arrayOf(titled("HighAvailabilityMember", HA_MEMBER.schema)), (ha) => ha.members.map(HA_MEMBER.map)),
  last_failover: field({ ...titled("LastFailover", LAST_FAILOVER.schema), type: ["object", "null"] }, (ha) =>
    ha.lastFailover ? LAST_FAILOVER.map(ha.lastFailover) : null,
  ),
});

// ---- The index: each schema by the name the route table gives it ----

const SCHEMAS = {
  Database: DATABASE.schema,
  CreatedDatabase: CREATED_DATABASE.schema,
  DatabaseListItem: DATABASE_LIST_ITEM.schema,
  RestoredFrom: RESTORED_FROM.schema,
  RestoredDatabase: RESTORED_DATABASE.schema,
  Backup: BACKUP.schema,
  TrustedSource: TRUSTED_SOURCE.schema,
  Pooler: POOLER.schema,
  Replica: REPLICA.schema,
  Metrics: METRICS.schema,
  Metric: METRIC.schema,
  MetricSeries: METRIC_SERIES.schema,
  WalArchiving: WAL_ARCHIVING.schema,
  DatabaseStatus: DATABASE_STATUS.schema,
  ResizedDatabase: RESIZED_DATABASE.schema,
  Credentials: CREDENTIALS.schema,
  Operation: OPERATION.schema,
  HighAvailability: HIGH_AVAILABILITY.schema,
  Regions: REGIONS_LIST.schema,
  Tiers: TIERS_LIST.schema,
  Versions: VERSIONS_LIST.schema,
  Usage: USAGE.schema,
  PaymentMethod: PAYMENT_METHOD.schema,
  Invoice: INVOICE.schema,
  Alert: ALERT.schema,
  Organization: ORGANIZATION.schema,
  User: USER.schema,
  Member: MEMBER.schema,
  Invitation: INVITATION.schema,
  Transfer: TRANSFER.schema,
  ApiKey: API_KEY.schema,
  CreatedApiKey: CREATED_API_KEY.schema,
  Token: TOKEN.schema,
  Signup: SIGNUP.schema,
  Acceptance: ACCEPTANCE.schema,
  ...INSIDE_SCHEMAS,
  OpenApiDocument: {
    type: "object",
    description: "An OpenAPI 3.1 document.",
    properties: {
      openapi: { type: "string", pattern: "^3\\.1\\." },
      info: { type: "object" },
      paths: { type: "object" },
    },
    required: ["openapi", "info", "paths"],
  },
} satisfies Record<string, JsonSchema>;

export type SchemaName = keyof typeof SCHEMAS;

/**
 * Fields some lists carry in `data` beside their items (`listOf`'s `extra`),
 * each required: the backups' restore window and the state of WAL archiving.
 */
const LIST_EXTRAS = {
  RestoreWindow: RESTORE_WINDOW.properties,
} satisfies Record<string, Record<string, JsonSchema>>;

export type ListExtraName = keyof typeof LIST_EXTRAS;

/** The properties of each `extra` of a list, by name. */
export const LIST_EXTRA_FIELDS: Readonly<Record<ListExtraName, Record<string, JsonSchema>>> = LIST_EXTRAS;

/** The schemas of `components.schemas`, by name. */
export const RESPONSE_SCHEMAS: Readonly<Record<SchemaName, JsonSchema>> = SCHEMAS;
