import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type {
  ConfigParameter,
  CreateRoleResponse,
  DbRole,
  Extension,
  ListLogsResponse,
  ListQueriesResponse,
  LogEntry,
  LogicalDb,
  QueryStat,
  ResetRolePasswordResponse,
} from "@dbaas/proto/inside";
import { iso, orNull, present } from "./mappers.ts";
import { arrayOf, bool, field, fieldsOf, type JsonSchema, record, str, through, titled } from "./record.ts";

/**
 * The records of what a customer does inside a database (docs/product.md, Inside the database), in
 * responses.ts's manner (record.ts: closed objects, every property required but the optional ones,
 * each read from the inside service's message). Spread into responses.ts's SCHEMAS.
 */

const int64 = (description: string): JsonSchema => ({ type: "integer", format: "int64", minimum: 0, description });

/** An extension's name as its control file has it (`uuid-ossp` has a dash). */
export const EXTENSION_NAME_PATTERN = "^[a-z0-9_][a-z0-9_-]{0,62}$";

/** A role or logical database name: a plain identifier, not `pg_…`. */
export const PLAIN_NAME_PATTERN = "^[a-z_][a-z0-9_]{0,62}$";

const ROLE_FIELDS = fieldsOf<DbRole>()({
  name: field({ ...str("A plain identifier."), pattern: PLAIN_NAME_PATTERN }, (r) => r.name),
  login: field(bool("Whether it may log in (roles made through the API always may)."), (r) => r.login),
  create_db: field(bool(), (r) => r.createDb),
  create_role: field(bool(), (r) => r.createRole),
  builtin: field(bool("The database's own role (`dbadmin`): it cannot be deleted."), (r) => r.builtin),
  created_at: field(
    {
      type: ["string", "null"],
      format: "date-time",
      description: "When it was made through the API; null for dbadmin and roles made in SQL.",
    },
    (r) => iso(r.createdAt),
  ),
});

/** A configuration value: a number (in the parameter's unit), a string, a boolean or a list of strings. */
export const CONFIG_VALUE: JsonSchema = {
  anyOf: [{ type: "number" }, { type: "string" }, { type: "boolean" }, { type: "array", items: { type: "string" } }],
};

const nullable = (type: string, description: string): JsonSchema => ({ type: [type, "null"], description });

export const ROLE = record<DbRole>("A role of the database: never superuser, replication or bypassrls; never a password.")(
  ROLE_FIELDS.fields,
);

/** What create and reset-password answer: the role with its (new) password. */
type RoleWithPassword = CreateRoleResponse | ResetRolePasswordResponse;

export const CREATED_ROLE = record<RoleWithPassword>("A role with its password: shown this once (a reset-password gives a new one).")({
  ...through((res: RoleWithPassword) => present(res.role, "role"), ROLE_FIELDS.fields),
  password: field(str(), (res) => res.password),
  connection_string: field(str("To defaultdb as this role, with the password in clear."), (res) => res.connectionString),
});

export const LOGICAL_DB = record<LogicalDb>("A logical database of the server (not `postgres`, not the templates).")({
  name: field({ ...str("A plain identifier."), pattern: PLAIN_NAME_PATTERN }, (d) => d.name),
  owner: field(str("The role that owns it."), (d) => d.owner),
  size_bytes: field(int64("Its size on disk (pg_database_size)."), (d) => Number(d.sizeBytes)),
  builtin: field(bool("The database every server has (`defaultdb`): it cannot be deleted."), (d) => d.builtin),
});

export const EXTENSION = record<Extension>("An extension the server's binaries offer, and whether a logical database has it.")({
  name: field(str(), (e) => e.name),
  default_version: field(str("The version an install gets."), (e) => e.defaultVersion),
  installed_version: field(nullable("string", "The version installed in the logical database asked about; null when it is not."), (e) =>
    orNull(e.installedVersion),
  ),
  installed: field(bool(), (e) => e.installed),
  trusted: field(bool("PostgreSQL's trusted flag: a database owner could install it without a superuser."), (e) => e.trusted),
  allowed: field(bool("Whether POST …/extensions installs it (the allowlist); others are refused."), (e) => e.allowed),
  description: field(str(), (e) => e.description),
});

const CONFIG_PARAMETER = record<ConfigParameter>("A parameter of the allowlist as the database has it.")({
  name: field(str("PostgreSQL's name of the parameter."), (p) => p.name),
  value: field(
    {
      ...CONFIG_VALUE,
      description: "What the database runs with (or will at its next restart): the override, else the default.",
    },
    (p) => (p.value ? toJson(ValueSchema, p.value) : null),
  ),
  default: field({ ...CONFIG_VALUE, description: "Its value without an override: the tier's, else PostgreSQL's." }, (p) =>
    p.defaultValue ? toJson(ValueSchema, p.defaultValue) : null,
  ),
  unit: field(
    nullable("string", "`kB`, `ms` or `s`: the unit of a number (a string value may name another: `64MB`, `30s`); null for others."),
    (p) => orNull(p.unit),
  ),
  type: field({ type: "string", enum: ["integer", "real", "bool", "enum", "string", "list"] }, (p) => p.type),
  min: field(nullable("number", "The least value on the database's tier; null when unbounded or not a number."), (p) => p.min ?? null),
  max: field(nullable("number", "The greatest value on the database's tier; null when unbounded or not a number."), (p) => p.max ?? null),
  allowed: field(
    {
      type: ["array", "null"],
      items: { type: "string" },
      description: "An enum's values, a list's possible members; null for others.",
    },
    (p) => (p.allowed.length > 0 ? p.allowed : null),
  ),
  requires_restart: field(bool("Only a restart applies a change."), (p) => p.requiresRestart),
  pending_restart: field(bool("Changed, waiting for the next restart to take effect."), (p) => p.pendingRestart),
  overridden: field(bool("Set by you (PATCH it to null for the default)."), (p) => p.overridden),
  description: field(str(), (p) => p.description),
});

/** What GET and PATCH …/config answer: every parameter of the allowlist. */
export const CONFIG = record<{ parameters: ConfigParameter[] }>("A database's configuration: every parameter that can be changed.")({
  parameters: field(arrayOf(titled("ConfigParameter", CONFIG_PARAMETER.schema)), (res) => res.parameters.map(CONFIG_PARAMETER.map)),
});

const LOG_ENTRY = record<LogEntry>(
  "One entry of the server's log (jsonlog). Never a password: an entry that mentions one has its literals masked.",
)({
  time: field({ type: "string", format: "date-time" }, (e) => iso(e.time)),
  severity: field(str("PostgreSQL's: DEBUG1…5, INFO, LOG, NOTICE, WARNING, ERROR, FATAL or PANIC."), (e) => e.severity),
  message: field(str(), (e) => e.message),
  detail: field(nullable("string", "PostgreSQL's DETAIL; null when none."), (e) => orNull(e.detail)),
  hint: field(nullable("string", "PostgreSQL's HINT; null when none."), (e) => orNull(e.hint)),
  context: field(nullable("string", "Where it happened (a function, a COPY line); null when none."), (e) => orNull(e.context)),
  statement: field(nullable("string", "The statement that failed (ERROR and worse); null when none."), (e) => orNull(e.statement)),
  sql_state: field(nullable("string", "SQLSTATE (e.g. 42P01: undefined table); null for 00000."), (e) =>
    e.sqlState === "00000" ? null : orNull(e.sqlState),
  ),
  user: field(nullable("string", "The role of the session; null for background processes."), (e) => orNull(e.user)),
  database: field(nullable("string", "The logical database of the session; null for background processes."), (e) => orNull(e.database)),
  application_name: field(nullable("string", "The session's application_name; null when none."), (e) => orNull(e.applicationName)),
  backend_type: field(str("The process: client backend, checkpointer, autovacuum worker, …"), (e) => e.backendType),
  pid: field({ type: "integer", description: "The server process." }, (e) => e.pid),
});

export const LOG_PAGE = record<ListLogsResponse>("A page of the server's log, oldest first (newest last).")({
  entries: field(arrayOf(titled("LogEntry", LOG_ENTRY.schema)), (res) => res.entries.map(LOG_ENTRY.map)),
  next_cursor: field(str("Pass as `cursor` for the entries written after these (what a tail polls with)."), (res) => res.nextCursor),
  prev_cursor: field(nullable("string", "Pass as `cursor` for the entries before these; null at the beginning of the log."), (res) =>
    orNull(res.prevCursor),
  ),
});

const QUERY_STAT = record<QueryStat>("One normalized statement of one role in one logical database.")({
  query_id: field(str("pg_stat_statements' queryid (a 64-bit integer, as a string)."), (s) => s.queryId),
  query: field(str("Normalized text: constants as $1, $2, …"), (s) => s.query),
  calls: field(int64("Times it ran."), (s) => Number(s.calls)),
  total_time_ms: field({ type: "number", description: "Planning and execution, in milliseconds, over all calls." }, (s) => s.totalTimeMs),
  mean_time_ms: field({ type: "number" }, (s) => s.meanTimeMs),
  min_time_ms: field({ type: "number", description: "Fastest execution." }, (s) => s.minTimeMs),
  max_time_ms: field({ type: "number", description: "Slowest execution." }, (s) => s.maxTimeMs),
  rows: field(int64("Rows returned or affected, over all calls."), (s) => Number(s.rows)),
  cache_hit_ratio: field(
    nullable("number", "Shared blocks found in the buffer cache / blocks needed; null when it read none."),
    (s) => s.cacheHitRatio ?? null,
  ),
  user: field(str(), (s) => s.user),
  database: field(nullable("string", "Null when the logical database was dropped."), (s) => orNull(s.database)),
});

export const QUERY_PAGE = record<ListQueriesResponse>(
  "Query insights from pg_stat_statements: the customer's roles' statements, normalized.",
)({
  queries: field(arrayOf(titled("QueryStat", QUERY_STAT.schema)), (res) => res.queries.map(QUERY_STAT.map)),
  stats_reset: field(
    {
      type: ["string", "null"],
      format: "date-time",
      description: "Since when the statistics count (the last reset).",
    },
    (res) => iso(res.statsReset),
  ),
});

export const INSIDE_SCHEMAS = {
  Role: ROLE.schema,
  CreatedRole: CREATED_ROLE.schema,
  LogicalDb: LOGICAL_DB.schema,
  Extension: EXTENSION.schema,
  Config: CONFIG.schema,
  LogPage: LOG_PAGE.schema,
  QueryPage: QUERY_PAGE.schema,
} satisfies Record<string, JsonSchema>;
