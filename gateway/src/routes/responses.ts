import { ALERT_CHANNELS, DATABASE_STATUSES, PAYMENT_METHOD_TYPES, REGIONS, ROLES, SCOPES, SUPPORT_PLANS, TIERS } from "@dbaas/catalogue";
import { BACKUP_STATUS, BACKUP_TYPE, HA_MEMBER_ROLES, OPERATION_STATUSES, OPERATION_TYPES, REPLICA_STATUSES } from "./mappers.ts";
import { INSIDE_SCHEMAS } from "./responses-inside.ts";

/**
 * JSON Schemas (2020-12, as OpenAPI 3.1 uses) of what each route puts in
 * `data`. Every object is closed (`additionalProperties: false`) and names
 * every field it always carries as required, so the end-to-end tests, which
 * validate every response against the published document, fail on a field
 * the document does not know or one a mapper forgot.
 */
export type JsonSchema = Record<string, unknown>;

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const str = (description?: string): JsonSchema => ({ type: "string", ...(description && { description }) });
const dateTime = (description?: string): JsonSchema => ({ type: "string", format: "date-time", ...(description && { description }) });
const nullableDateTime = (description: string): JsonSchema => ({ type: ["string", "null"], format: "date-time", description });
const oneOf = (values: readonly string[], description?: string): JsonSchema => ({
  type: "string",
  enum: [...values],
  ...(description && { description }),
});
const int = (description?: string): JsonSchema => ({ type: "integer", ...(description && { description }) });
const num = (description?: string): JsonSchema => ({ type: "number", ...(description && { description }) });
const arrayOf = (items: JsonSchema): JsonSchema => ({ type: "array", items });

/**
 * An inline schema given the name the Go and Python clients' generated types use for it
 * (sdks/scripts/generate-types.ts); a component schema is named by its key.
 */
const titled = (title: string, schema: JsonSchema): JsonSchema => ({ title, ...schema });

/** A closed object: every property required except those named in `optional`. */
function object(description: string, properties: Record<string, JsonSchema>, optional: string[] = []): JsonSchema {
  return {
    type: "object",
    description,
    properties,
    required: Object.keys(properties).filter((k) => !optional.includes(k)),
    additionalProperties: false,
  };
}

const INVOICE_STATUSES = ["open", "paid", "past_due"];
// Every plan an organization can be on: `internal` is set by support only, for our own tooling.
const PLANS = SUPPORT_PLANS;

const id = (prefix: string) => ({ type: "string", pattern: `^${prefix}`, description: `Identifier, prefix \`${prefix}\`.` });
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
const role = oneOf(ROLES);
const accessToken = {
  access_token: str("Bearer credential for the Authorization header."),
  token_type: { const: "Bearer" },
  expires_at: dateTime("When the token stops working (1 hour after issue)."),
};

const apiKeyFields = {
  id: id("key-"),
  name: str(),
  scopes: arrayOf(oneOf(SCOPES)),
  prefix: str("First characters of the secret, to recognise it."),
  role: oneOf(ROLES, "The creator's role when the key was created; the key keeps it."),
  created_by: str("User id of the creator."),
  created_at: dateTime(),
  expires_at: nullableDateTime("Null: never expires."),
};

const restoredFrom = {
  restored_from: {
    ...ref("RestoredFrom"),
    description: "Set on a database made by `POST /v1/databases/{id}/restore`; absent otherwise.",
  },
};

const createdDatabase = {
  id: id("db-"),
  name: str(),
  type: { const: "postgres" },
  region,
  tier,
  version,
  status: databaseStatus,
  host: str(),
  port: int(),
  database: str(),
  username: str(),
  password: str(),
  connection_string: str("With the password in clear."),
  created_at: dateTime(),
};

const SCHEMAS = {
  Database: object(
    "A database as GET and PATCH return it: the connection string's password masked.",
    {
      id: id("db-"),
      name: str("3-63 characters."),
      type: { const: "postgres" },
      region,
      tier,
      version,
      status: databaseStatus,
      status_reason: str("Why the database is `failed`; absent otherwise."),
      host: str("`<id>.<database domain>`."),
      port: int(),
      database: str(),
      username: str(),
      connection_string: str("`postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`."),
      created_at: dateTime(),
      updated_at: dateTime(),
      ...restoredFrom,
    },
    ["status_reason", "restored_from"],
  ),
  CreatedDatabase: object("A new database, with its password: shown this once.", createdDatabase),
  DatabaseListItem: object("A database as lists show it: exactly these fields.", {
    id: id("db-"),
    name: str(),
    region,
    tier,
    version,
    status: databaseStatus,
    created_at: dateTime(),
  }),
  RestoredFrom: object("The database and the instant a restored database was made from.", {
    database_id: id("db-"),
    restore_time: dateTime("It holds exactly the transactions committed up to this instant."),
  }),
  RestoredDatabase: object("A new database restored from another's backups, with its password: shown this once.", {
    ...createdDatabase,
    restored_from: ref("RestoredFrom"),
  }),
  Backup: object("A base backup of a database.", {
    id: id("bkp-"),
    type: oneOf(BACKUP_TYPE.names, "`scheduled`: daily (and the first, when the database first ran); `manual`: asked for."),
    status: oneOf(BACKUP_STATUS.names, "`completed`: stored with the WAL it needs, usable for a restore."),
    started_at: dateTime(),
    completed_at: nullableDateTime("When it completed or failed; null while running."),
    size_bytes: { type: "integer", format: "int64", minimum: 0, description: "Compressed bytes stored; 0 until completed." },
    failure_reason: { type: ["string", "null"], description: "Why it failed; null otherwise." },
  }),
  TrustedSource: {
    ...object("An address range allowed to connect to a database, its pooler and its replicas.", {
      id: id("ts-"),
      cidr: str("IPv4 or IPv6 network in CIDR form, normalized (`203.0.113.0/24`, `198.51.100.7/32`, `2001:db8::/32`)."),
      description: str("What the entry is for; empty when none was given."),
      expires_at: nullableDateTime("When the entry stops admitting and leaves the list; null: never."),
      created_at: dateTime(),
    }),
    examples: [{ id: "ts-4b8r2k9q", cidr: "203.0.113.0/24", description: "office", expires_at: null, created_at: "2026-01-05T10:00:00Z" }],
  },
  Pooler: {
    ...object(
      "A database's connection pooler (PgBouncer) with its own host name and port; the database's username and password log in.",
      {
        enabled: { type: "boolean", description: "Whether the pooler runs (false where its host cannot run one: see `reason`)." },
        mode: oneOf(["transaction", "session"], "Pool mode: `transaction` (default) or `session`."),
        pool_size: int("Server connections per database and user."),
        max_client_connections: int("Client connections the pooler accepts at once."),
        host: str("`<database id>-pooler.<database domain>`: its certificate's name (sslmode=verify-full with the CA certificate)."),
        port: int(),
        connection_string: str("`postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`."),
        reason: str("Why there is no pooler; absent when there can be one."),
      },
      ["host", "port", "connection_string", "reason"],
    ),
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
  Replica: {
    ...object(
      "A read replica of a database: a hot standby streaming from it, read-only, reached with the database's own username and password.",
      {
        id: id("rep-"),
        name: str("3-63 characters."),
        database_id: { ...id("db-"), description: "The primary: the database the replica follows." },
        region,
        tier,
        status: oneOf(REPLICA_STATUSES, "Lifecycle status; it follows the primary's stops and starts."),
        status_reason: str("Why the replica is `failed`; absent otherwise."),
        host: str("`<id>.<database domain>`."),
        port: int(),
        database: str("The primary's database."),
        username: str("The primary's username; its password works here too."),
        connection_string: str("`postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`."),
        lag_bytes: {
          type: "integer",
          format: "int64",
          minimum: 0,
          description: "Bytes of WAL not yet replayed, as last measured; 0 until measured.",
        },
        created_at: dateTime(),
      },
      ["status_reason"],
    ),
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
  Metrics: object("A database's metrics.", {
    start: dateTime(),
    end: dateTime(),
    step: int("Seconds between points."),
    metrics: arrayOf(ref("Metric")),
  }),
  Metric: object("One metric: its series, one per label set.", {
    name: str(
      "cpu_percent, memory_bytes, storage_bytes, connections, transactions_per_second, rows_per_second, cache_hit_ratio, deadlocks, network_bytes_per_second, replication_lag_bytes or wal_archive_lag_seconds.",
    ),
    unit: str(),
    series: arrayOf(ref("MetricSeries")),
  }),
  MetricSeries: object("The points of one label set; a bucket without samples has no point.", {
    labels: {
      type: "object",
      additionalProperties: { type: "string" },
      description:
        "`state` (connections): active, idle, idle_in_transaction; `op` (rows_per_second): fetched, inserted, updated, deleted; `direction` (network_bytes_per_second): in, out; `replica` (replication_lag_bytes): the replica's id.",
    },
    points: arrayOf({
      type: "array",
      title: "Point",
      prefixItems: [int("Unix seconds: the bucket's start."), num()],
      minItems: 2,
      maxItems: 2,
    }),
  }),
  WalArchiving: object("Whether the database's WAL reaches the backup store: what keeps the restore window moving.", {
    status: oneOf(["healthy", "failing"]),
    error: { type: ["string", "null"], description: "Why archiving is failing (store unreachable, spool full); null while healthy." },
  }),
  DatabaseStatus: object("The database's status after start, stop or restart was accepted.", {
    id: id("db-"),
    status: databaseStatus,
  }),
  ResizedDatabase: object("The database's new tier and status after a resize was accepted.", {
    id: id("db-"),
    tier,
    status: databaseStatus,
  }),
  Credentials: object("New credentials; the previous password no longer works.", {
    password: str(),
    connection_string: str("With the password in clear."),
  }),
  Operation: object(
    "One operation run on a database.",
    {
      id: id("op-"),
      type: oneOf(
        OPERATION_TYPES,
        "`restore`: a deleted database brought back, or a database made from another's backups; " +
          "`promote`: the database a promoted read replica became; " +
          "`backup`: a base backup; `wal_archive`: WAL archiving started failing (failed, with why) or resumed (succeeded); " +
          "`storage_full`: the database reached its tier's storage and was made read-only (a session may still " +
          "`SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE` to delete data); `storage_ok`: below 95 % again, writable; " +
          "`failover`: a standby promoted, automatically or by a planned switchover (succeeded once it runs as the primary).",
      ),
      status: oneOf(OPERATION_STATUSES),
      started_at: dateTime(),
      finished_at: nullableDateTime("Null while running."),
      error: { type: ["string", "null"], description: "Why it failed; null otherwise." },
      reason: str(
        "A `failover`'s only: why it happened (the lost lease, the failed server, or a planned switchover) and what became of the old primary's data.",
      ),
      from: str("A `failover`'s only: the member that was the primary (`node-…`)."),
      to: str("A `failover`'s only: the standby promoted (`node-…`), the primary from then on."),
    },
    ["reason", "from", "to"],
  ),
  HighAvailability: {
    ...object(
      "A database's high availability: its standbys (streaming replicas on other hosts of its region, promoted automatically when the primary is lost) and their mode, its members now, and its last failover.",
      {
        standbys: { type: "integer", minimum: 0, maximum: 2, description: "Standbys kept." },
        synchronous: {
          type: "boolean",
          description: "Whether a commit returns only once a standby has its WAL (no acknowledged commit lost on failover).",
        },
        members: arrayOf(
          titled(
            "HighAvailabilityMember",
            object("One server of the database: the primary first, then the standbys, oldest first.", {
              id: id("node-"),
              role: oneOf(HA_MEMBER_ROLES, "The primary takes the connections; a standby streams from it and is not reachable by clients."),
              status: databaseStatus,
              region,
              lag_bytes: {
                type: "integer",
                format: "int64",
                minimum: 0,
                description: "A standby's WAL not yet replayed, as last measured; 0 for the primary.",
              },
            }),
          ),
        ),
        last_failover: {
          ...titled(
            "LastFailover",
            object("The last failover or switchover; null before the first.", {
              at: dateTime(),
              reason: str("Why it happened."),
              from: str("The member that was the primary."),
              to: str("The standby promoted."),
            }),
          ),
          type: ["object", "null"],
        },
      },
    ),
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
  Regions: object("Regions a database can be created in.", {
    regions: arrayOf(titled("Region", object("A region.", { code: region, name: str("Location.") }))),
  }),
  Tiers: object("Instance tiers.", {
    tiers: arrayOf(
      titled(
        "Tier",
        object("A tier.", {
          name: tier,
          vcpu: int(),
          memory_gb: num(),
          storage_gb: num(),
          hourly_price: num("USD per hour while running."),
        }),
      ),
    ),
  }),
  Versions: object("PostgreSQL versions.", {
    versions: arrayOf(titled("Version", object("A version.", { version, default: { type: "boolean" } }))),
  }),
  Usage: object("Month-to-date usage of the organization and its price.", {
    period: object("The billing period, half-open.", {
      start: dateTime(),
      end: dateTime("First instant of the next month."),
    }),
    usage: object("Quantities and amounts per meter.", {
      compute: titled("UsageHours", object("Running time.", { hours: num(), amount: num() })),
      storage: titled("UsageGB", object("Stored data.", { gb: num("GB-months."), amount: num() })),
      data_transfer: titled("UsageGB", object("Data transferred.", { gb: num(), amount: num() })),
      replicas: titled("UsageHours", object("Replica running time.", { hours: num(), amount: num() })),
    }),
    total: num(),
    currency: str("Three-letter currency code."),
  }),
  PaymentMethod: object("A payment method: what the payment processor reports about the card it holds, never its number.", {
    id: id("pm-"),
    type: oneOf(PAYMENT_METHOD_TYPES),
    brand: str("Lowercase card brand as the processor names it (`visa`, `mastercard`, …)."),
    last4: { type: "string", pattern: "^[0-9]{4}$", description: "Last four digits of the card number." },
    exp_month: { type: "integer", minimum: 1, maximum: 12 },
    exp_year: int(),
    default: { type: "boolean", description: "Whether invoices are charged to it; an organization has at most one default." },
    created_at: dateTime(),
  }),
  Invoice: object("The bill of one calendar month (UTC), issued after the month ended and charged to the default payment method.", {
    id: id("inv-"),
    period: { type: "string", pattern: "^[0-9]{4}-(0[1-9]|1[0-2])$", description: "The month billed, `YYYY-MM`." },
    amount: num("Sum of the lines' amounts."),
    currency: str("Three-letter currency code."),
    status: oneOf(
      INVOICE_STATUSES,
      "`open`: issued, the charge not made yet or being retried; `paid`; `past_due`: the charge was declined or there was no payment method.",
    ),
    issued_at: dateTime(),
    due_at: dateTime("The charge is attempted when the invoice is issued: the same instant."),
    paid_at: nullableDateTime("Null until paid."),
    pdf_url: { type: "string", format: "uri", description: "The invoice as a PDF (GET with the same credential)." },
    lines: arrayOf(
      titled(
        "InvoiceLine",
        object("One priced line.", {
          description: str("What was used, e.g. `Compute, small`."),
          quantity: num(),
          unit: oneOf(["hour", "GB-month", "GB"]),
          amount: num("Rounded to cents."),
        }),
      ),
    ),
  }),
  Alert: object("A spending alert: fires at most once per calendar month (UTC).", {
    id: id("alr-"),
    threshold: num("Month-to-date total, in `currency`, at which the alert fires."),
    currency: str("Three-letter currency code."),
    channels: arrayOf(oneOf(ALERT_CHANNELS, "`email`: a mail to every member who may read billing.")),
    created_at: dateTime(),
  }),
  Organization: object("An organization.", {
    id: id("org-"),
    name: str(),
    plan: oneOf(PLANS, "Rate limits follow the plan."),
    created_at: dateTime(),
  }),
  User: object("A user.", { id: id("user-"), email: str(), name: str() }),
  Member: object("A member of the organization.", {
    id: id("member-"),
    user: ref("User"),
    role,
    joined_at: dateTime(),
  }),
  Invitation: object("An invitation.", {
    id: id("invite-"),
    email: str(),
    role,
    status: oneOf(["pending", "expired"]),
    expires_at: dateTime(),
    created_at: dateTime(),
  }),
  Transfer: object("Both member records after an ownership transfer.", {
    owner: ref("Member"),
    previous_owner: ref("Member"),
  }),
  ApiKey: object("An API key (never its secret).", apiKeyFields),
  CreatedApiKey: object("A new API key with its secret, shown this once.", {
    ...apiKeyFields,
    secret: str("The key itself, for `Authorization: Bearer`."),
  }),
  Token: object("A login token.", accessToken),
  Signup: object("The new user, their organization and a login token.", {
    user: ref("User"),
    organization: ref("Organization"),
    ...accessToken,
  }),
  Acceptance: object("The organization joined, the new membership and a login token acting in it.", {
    organization: ref("Organization"),
    member: ref("Member"),
    ...accessToken,
  }),
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
  RestoreWindow: {
    earliest_restore_time: nullableDateTime("The earliest instant a restore can reach; null until a backup completed."),
    latest_restore_time: nullableDateTime("The latest instant a restore can reach (within 90 s of now while archiving is healthy)."),
    wal_archiving: ref("WalArchiving"),
  },
} satisfies Record<string, Record<string, JsonSchema>>;

export type ListExtraName = keyof typeof LIST_EXTRAS;

/** The properties of each `extra` of a list, by name. */
export const LIST_EXTRA_FIELDS: Readonly<Record<ListExtraName, Record<string, JsonSchema>>> = LIST_EXTRAS;

/** The schemas of `components.schemas`, by name. */
export const RESPONSE_SCHEMAS: Readonly<Record<SchemaName, JsonSchema>> = SCHEMAS;
