/**
 * The response schemas of what a customer does inside a database (docs/product.md, Inside the
 * database), in responses.ts's manner: closed objects, every property required but the ones named
 * optional. Spread into responses.ts's SCHEMAS.
 */
type JsonSchema = Record<string, unknown>;

const str = (description?: string): JsonSchema => ({ type: "string", ...(description && { description }) });
const bool = (description?: string): JsonSchema => ({ type: "boolean", ...(description && { description }) });
const int64 = (description: string): JsonSchema => ({ type: "integer", format: "int64", minimum: 0, description });

function object(description: string, properties: Record<string, JsonSchema>, optional: string[] = []): JsonSchema {
  return {
    type: "object",
    description,
    properties,
    required: Object.keys(properties).filter((k) => !optional.includes(k)),
    additionalProperties: false,
  };
}

/** An extension's name as its control file has it (`uuid-ossp` has a dash). */
export const EXTENSION_NAME_PATTERN = "^[a-z0-9_][a-z0-9_-]{0,62}$";

/** A role or logical database name: a plain identifier, not `pg_…`. */
export const PLAIN_NAME_PATTERN = "^[a-z_][a-z0-9_]{0,62}$";

const roleFields = {
  name: { ...str("A plain identifier."), pattern: PLAIN_NAME_PATTERN },
  login: bool("Whether it may log in (roles made through the API always may)."),
  create_db: bool(),
  create_role: bool(),
  builtin: bool("The database's own role (`dbadmin`): it cannot be deleted."),
  created_at: {
    type: ["string", "null"],
    format: "date-time",
    description: "When it was made through the API; null for dbadmin and roles made in SQL.",
  },
};

/** A configuration value: a number (in the parameter's unit), a string, a boolean or a list of strings. */
export const CONFIG_VALUE: JsonSchema = {
  anyOf: [{ type: "number" }, { type: "string" }, { type: "boolean" }, { type: "array", items: { type: "string" } }],
};

const nullable = (type: string, description: string): JsonSchema => ({ type: [type, "null"], description });

export const INSIDE_SCHEMAS = {
  Role: object("A role of the database: never superuser, replication or bypassrls; never a password.", roleFields),
  CreatedRole: object("A role with its password: shown this once (a reset-password gives a new one).", {
    ...roleFields,
    password: str(),
    connection_string: str("To defaultdb as this role, with the password in clear."),
  }),
  LogicalDb: object("A logical database of the server (not `postgres`, not the templates).", {
    name: { ...str("A plain identifier."), pattern: PLAIN_NAME_PATTERN },
    owner: str("The role that owns it."),
    size_bytes: int64("Its size on disk (pg_database_size)."),
    builtin: bool("The database every server has (`defaultdb`): it cannot be deleted."),
  }),
  Extension: object("An extension the server's binaries offer, and whether a logical database has it.", {
    name: str(),
    default_version: str("The version an install gets."),
    installed_version: nullable("string", "The version installed in the logical database asked about; null when it is not."),
    installed: bool(),
    trusted: bool("PostgreSQL's trusted flag: a database owner could install it without a superuser."),
    allowed: bool("Whether POST …/extensions installs it (the allowlist); others are refused."),
    description: str(),
  }),
  Config: object("A database's configuration: every parameter that can be changed.", {
    parameters: {
      type: "array",
      items: {
        title: "ConfigParameter",
        ...object("A parameter of the allowlist as the database has it.", {
          name: str("PostgreSQL's name of the parameter."),
          value: {
            ...CONFIG_VALUE,
            description: "What the database runs with (or will at its next restart): the override, else the default.",
          },
          default: { ...CONFIG_VALUE, description: "Its value without an override: the tier's, else PostgreSQL's." },
          unit: nullable(
            "string",
            "`kB`, `ms` or `s`: the unit of a number (a string value may name another: `64MB`, `30s`); null for others.",
          ),
          type: { type: "string", enum: ["integer", "real", "bool", "enum", "string", "list"] },
          min: nullable("number", "The least value on the database's tier; null when unbounded or not a number."),
          max: nullable("number", "The greatest value on the database's tier; null when unbounded or not a number."),
          allowed: {
            type: ["array", "null"],
            items: { type: "string" },
            description: "An enum's values, a list's possible members; null for others.",
          },
          requires_restart: bool("Only a restart applies a change."),
          pending_restart: bool("Changed, waiting for the next restart to take effect."),
          overridden: bool("Set by you (PATCH it to null for the default)."),
          description: str(),
        }),
      },
    },
  }),
  LogPage: object("A page of the server's log, oldest first (newest last).", {
    entries: {
      type: "array",
      items: {
        title: "LogEntry",
        ...object("One entry of the server's log (jsonlog). Never a password: an entry that mentions one has its literals masked.", {
          time: { type: "string", format: "date-time" },
          severity: str("PostgreSQL's: DEBUG1…5, INFO, LOG, NOTICE, WARNING, ERROR, FATAL or PANIC."),
          message: str(),
          detail: nullable("string", "PostgreSQL's DETAIL; null when none."),
          hint: nullable("string", "PostgreSQL's HINT; null when none."),
          context: nullable("string", "Where it happened (a function, a COPY line); null when none."),
          statement: nullable("string", "The statement that failed (ERROR and worse); null when none."),
          sql_state: nullable("string", "SQLSTATE (e.g. 42P01: undefined table); null for 00000."),
          user: nullable("string", "The role of the session; null for background processes."),
          database: nullable("string", "The logical database of the session; null for background processes."),
          application_name: nullable("string", "The session's application_name; null when none."),
          backend_type: str("The process: client backend, checkpointer, autovacuum worker, …"),
          pid: { type: "integer", description: "The server process." },
        }),
      },
    },
    next_cursor: str("Pass as `cursor` for the entries written after these (what a tail polls with)."),
    prev_cursor: nullable("string", "Pass as `cursor` for the entries before these; null at the beginning of the log."),
  }),
  QueryPage: object("Query insights from pg_stat_statements: the customer's roles' statements, normalized.", {
    queries: {
      type: "array",
      items: {
        title: "QueryStat",
        ...object("One normalized statement of one role in one logical database.", {
          query_id: str("pg_stat_statements' queryid (a 64-bit integer, as a string)."),
          query: str("Normalized text: constants as $1, $2, …"),
          calls: int64("Times it ran."),
          total_time_ms: { type: "number", description: "Planning and execution, in milliseconds, over all calls." },
          mean_time_ms: { type: "number" },
          min_time_ms: { type: "number", description: "Fastest execution." },
          max_time_ms: { type: "number", description: "Slowest execution." },
          rows: int64("Rows returned or affected, over all calls."),
          cache_hit_ratio: nullable("number", "Shared blocks found in the buffer cache / blocks needed; null when it read none."),
          user: str(),
          database: nullable("string", "Null when the logical database was dropped."),
        }),
      },
    },
    stats_reset: {
      type: ["string", "null"],
      format: "date-time",
      description: "Since when the statistics count (the last reset).",
    },
  }),
} satisfies Record<string, JsonSchema>;
