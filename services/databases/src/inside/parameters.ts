import { tierSpec, type TierName } from "@dbaas/catalogue";

/**
 * The configuration a customer may change (docs/product.md, Inside the database): an allowlist of
 * PostgreSQL parameters, each with its type, its unit, its bounds (some the tier's: connections,
 * memory, parallel workers) and whether it takes a restart. Anything else is refused. Values are kept
 * normalized, as the agent writes them with ALTER SYSTEM (`65536kB`, `30000ms`, `on`, `'read committed'`).
 *
 * How a database's settings combine, lowest first (docs/decisions.md, "Inside the database"):
 * PostgreSQL's defaults < the agent's settings for the tier (`dbaas.conf`, included from postgresql.conf)
 * < the customer's overrides (`postgresql.auto.conf`, which PostgreSQL reads last). The agent's own
 * settings (ports, TLS, archiving, sockets, pg_hba) are on no allowlist, so no override reaches them.
 */

export type ParameterType = "integer" | "real" | "bool" | "enum" | "string" | "list";
/** PostgreSQL's base unit of the parameter; memory always in kB (block-sized ones in multiples of 8 kB). */
export type ParameterUnit = "kB" | "ms" | "s";

export interface ParameterSpec {
  name: string;
  type: ParameterType;
  unit?: ParameterUnit;
  /** Memory counted by PostgreSQL in 8 kB blocks: a value must be a multiple of 8 kB. */
  blocks?: boolean;
  min?: number | ((tier: TierName) => number);
  max?: number | ((tier: TierName) => number);
  /** The values of an enum, the members a list may hold. */
  allowed?: readonly string[];
  /** Only a restart of the server applies it (PostgreSQL's `postmaster` context). */
  restart: boolean;
  /** PostgreSQL's (or the agent's, for what it sets whatever the tier) value without an override, normalized. */
  pgDefault: string;
  /** A replica does not take it from its primary: its own value is forced by hot standby (replication.ts's floors). */
  primaryOnly?: boolean;
  description: string;
}

const KB_PER_GB = 1024 * 1024;
const INT_MAX = 2_147_483_647;
const memoryKb = (tier: TierName) => tierSpec(tier).memoryGb * KB_PER_GB;
const fraction =
  (f: number, cap = Number.POSITIVE_INFINITY) =>
  (tier: TierName) =>
    Math.floor(Math.min(memoryKb(tier) * f, cap) / 8) * 8;

/** The allowlist, by name. */
export const PARAMETERS: readonly ParameterSpec[] = [
  // Memory: bounded by the tier's memory.
  {
    name: "work_mem",
    type: "integer",
    unit: "kB",
    min: 64,
    max: fraction(1 / 4),
    restart: false,
    pgDefault: "4096kB",
    description: "Memory per sort or hash before spilling to disk.",
  },
  {
    name: "maintenance_work_mem",
    type: "integer",
    unit: "kB",
    min: 1024,
    max: fraction(1 / 4, 2 * KB_PER_GB - 1),
    restart: false,
    pgDefault: "65536kB",
    description: "Memory for VACUUM, CREATE INDEX and similar.",
  },
  {
    name: "effective_cache_size",
    type: "integer",
    unit: "kB",
    blocks: true,
    min: 8,
    max: fraction(1),
    restart: false,
    pgDefault: "4194304kB",
    description: "The planner's assumption of the cache available to one query.",
  },
  {
    name: "temp_buffers",
    type: "integer",
    unit: "kB",
    blocks: true,
    min: 800,
    max: fraction(1 / 4),
    restart: false,
    pgDefault: "8192kB",
    description: "Memory per session for temporary tables.",
  },
  {
    name: "shared_buffers",
    type: "integer",
    unit: "kB",
    blocks: true,
    min: 128,
    max: fraction(0.4),
    restart: true,
    pgDefault: "131072kB",
    description: "Memory for the shared buffer cache.",
  },
  // Connections and parallelism: bounded by the tier.
  {
    name: "max_connections",
    type: "integer",
    min: 10,
    max: (t) => tierSpec(t).maxConnections,
    restart: true,
    pgDefault: "100",
    primaryOnly: true,
    description: "Concurrent connections the server accepts; at most the tier's.",
  },
  {
    name: "max_parallel_workers_per_gather",
    type: "integer",
    min: 0,
    max: (t) => tierSpec(t).vcpu,
    restart: false,
    pgDefault: "2",
    description: "Parallel workers one query step may use; at most the tier's vCPUs.",
  },
  // Timeouts.
  {
    name: "statement_timeout",
    type: "integer",
    unit: "ms",
    min: 0,
    max: INT_MAX,
    restart: false,
    pgDefault: "0ms",
    description: "Statements running longer are cancelled; 0: never.",
  },
  {
    name: "idle_in_transaction_session_timeout",
    type: "integer",
    unit: "ms",
    min: 0,
    max: INT_MAX,
    restart: false,
    pgDefault: "0ms",
    description: "Sessions idle inside a transaction longer are ended; 0: never.",
  },
  {
    name: "idle_session_timeout",
    type: "integer",
    unit: "ms",
    min: 0,
    max: INT_MAX,
    restart: false,
    pgDefault: "0ms",
    description: "Sessions idle outside a transaction longer are ended; 0: never.",
  },
  {
    name: "lock_timeout",
    type: "integer",
    unit: "ms",
    min: 0,
    max: INT_MAX,
    restart: false,
    pgDefault: "0ms",
    description: "Waits for a lock longer are cancelled; 0: never.",
  },
  {
    name: "deadlock_timeout",
    type: "integer",
    unit: "ms",
    min: 1,
    max: INT_MAX,
    restart: false,
    pgDefault: "1000ms",
    description: "How long a lock wait lasts before deadlock detection runs.",
  },
  // Logging (into the log /logs reads).
  {
    name: "log_min_duration_statement",
    type: "integer",
    unit: "ms",
    min: -1,
    max: INT_MAX,
    restart: false,
    pgDefault: "-1ms",
    description: "Statements taking at least this long are logged with their duration; -1: none.",
  },
  { name: "log_lock_waits", type: "bool", restart: false, pgDefault: "off", description: "Log lock waits longer than deadlock_timeout." },
  {
    name: "log_temp_files",
    type: "integer",
    unit: "kB",
    min: -1,
    max: INT_MAX,
    restart: false,
    pgDefault: "-1kB",
    description: "Log temporary files at least this large; -1: none.",
  },
  {
    name: "log_autovacuum_min_duration",
    type: "integer",
    unit: "ms",
    min: -1,
    max: INT_MAX,
    restart: false,
    pgDefault: "600000ms",
    description: "Log autovacuum runs taking at least this long; -1: none.",
  },
  // Sessions.
  {
    name: "timezone",
    type: "string",
    restart: false,
    pgDefault: "UTC",
    description: "Time zone of timestamps shown to sessions (an IANA name).",
  },
  {
    name: "default_transaction_isolation",
    type: "enum",
    allowed: ["read uncommitted", "read committed", "repeatable read", "serializable"],
    restart: false,
    pgDefault: "read committed",
    description: "Isolation level of new transactions.",
  },
  {
    name: "synchronous_commit",
    type: "enum",
    allowed: ["on", "off", "local", "remote_write", "remote_apply"],
    restart: false,
    pgDefault: "on",
    description: "Whether a commit waits for its WAL to reach disk (and standbys).",
  },
  { name: "jit", type: "bool", restart: false, pgDefault: "on", description: "Just-in-time compilation of expensive queries." },
  // Planner.
  {
    name: "random_page_cost",
    type: "real",
    min: 0,
    max: 1000,
    restart: false,
    pgDefault: "4",
    description: "The planner's cost of a non-sequential page read.",
  },
  {
    name: "seq_page_cost",
    type: "real",
    min: 0,
    max: 1000,
    restart: false,
    pgDefault: "1",
    description: "The planner's cost of a sequential page read.",
  },
  {
    name: "effective_io_concurrency",
    type: "integer",
    min: 0,
    max: 1000,
    restart: false,
    pgDefault: "1",
    description: "Concurrent disk reads the planner expects.",
  },
  {
    name: "default_statistics_target",
    type: "integer",
    min: 1,
    max: 10000,
    restart: false,
    pgDefault: "100",
    description: "Detail of the statistics ANALYZE gathers.",
  },
  // Autovacuum and checkpoints.
  {
    name: "autovacuum_vacuum_scale_factor",
    type: "real",
    min: 0,
    max: 100,
    restart: false,
    pgDefault: "0.2",
    description: "Fraction of a table changed before it is vacuumed.",
  },
  {
    name: "autovacuum_analyze_scale_factor",
    type: "real",
    min: 0,
    max: 100,
    restart: false,
    pgDefault: "0.1",
    description: "Fraction of a table changed before it is analyzed.",
  },
  {
    name: "autovacuum_vacuum_cost_limit",
    type: "integer",
    min: -1,
    max: 10000,
    restart: false,
    pgDefault: "-1",
    description: "Work autovacuum does before it pauses; -1: vacuum_cost_limit.",
  },
  {
    name: "autovacuum_naptime",
    type: "integer",
    unit: "s",
    min: 1,
    max: 2_147_483,
    restart: false,
    pgDefault: "60s",
    description: "Pause between autovacuum runs on a database.",
  },
  {
    name: "checkpoint_timeout",
    type: "integer",
    unit: "s",
    min: 30,
    max: 86_400,
    restart: false,
    pgDefault: "300s",
    description: "Longest time between automatic checkpoints.",
  },
  {
    name: "track_io_timing",
    type: "bool",
    restart: false,
    pgDefault: "off",
    description: "Time disk reads and writes (shown in query statistics).",
  },
  // Query statistics (pg_stat_statements) and preloaded libraries.
  {
    name: "pg_stat_statements.track",
    type: "enum",
    allowed: ["none", "top", "all"],
    restart: false,
    pgDefault: "top",
    description: "Which statements query insights count (all: nested ones too).",
  },
  {
    name: "pg_stat_statements.max",
    type: "integer",
    min: 100,
    max: 100_000,
    restart: true,
    pgDefault: "5000",
    description: "Distinct statements query insights keep.",
  },
  {
    name: "shared_preload_libraries",
    type: "list",
    allowed: ["pg_stat_statements", "auto_explain"],
    restart: true,
    pgDefault: "pg_stat_statements",
    description: "Libraries loaded at start; without pg_stat_statements there are no query insights.",
  },
];

const BY_NAME = new Map(PARAMETERS.map((p) => [p.name, p]));

export const parameterSpec = (name: string): ParameterSpec | undefined => BY_NAME.get(name);

const bound = (b: ParameterSpec["min"], tier: TierName): number | undefined => (typeof b === "function" ? b(tier) : b);

/** A parameter's bounds for a tier, in its unit. */
export function boundsOf(spec: ParameterSpec, tier: TierName): { min?: number; max?: number } {
  const min = bound(spec.min, tier);
  const max = bound(spec.max, tier);
  return { ...(min !== undefined && { min }), ...(max !== undefined && { max }) };
}

const MEMORY_UNITS: Record<string, number> = { kb: 1, mb: 1024, gb: 1024 * 1024, tb: 1024 * 1024 * 1024 };
const TIME_UNITS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/** A number with an optional PostgreSQL unit (`64MB`, `30s`) in `unit`; undefined when it is not one. */
function inUnit(raw: string | number, unit: ParameterUnit | undefined): number | undefined {
  if (typeof raw === "number") return raw;
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(raw);
  if (!m) return undefined;
  const n = Number(m[1]);
  const suffix = m[2]!.toLowerCase();
  if (suffix === "") return n;
  if (unit === "kB") return MEMORY_UNITS[suffix] === undefined ? undefined : n * MEMORY_UNITS[suffix]!;
  if (unit === "ms" || unit === "s") {
    const ms = TIME_UNITS[suffix];
    return ms === undefined ? undefined : (n * ms) / (unit === "s" ? 1000 : 1);
  }
  return undefined;
}

const unitWords = (unit: ParameterUnit | undefined) =>
  unit === "kB"
    ? " (kB, or with a unit: 64MB, 1GB)"
    : unit === "ms"
      ? " (ms, or with a unit: 30s, 5min)"
      : unit === "s"
        ? " (s, or with a unit: 5min, 1h)"
        : "";

let timeZones: Set<string> | undefined;
/** The IANA time zone names this runtime knows, and UTC. */
function isTimeZone(name: string): boolean {
  timeZones ??= new Set([...Intl.supportedValuesOf("timeZone"), "UTC", "Etc/UTC", "GMT"]);
  return timeZones.has(name);
}

/**
 * A value a caller gave for `spec` (a number, a string with a unit, a boolean, a list), checked for
 * `tier`: its normalized form, or why it is refused (a message for the field `parameters.<name>`).
 */
export function normalize(spec: ParameterSpec, raw: unknown, tier: TierName): { value: string } | { error: string } {
  switch (spec.type) {
    case "bool": {
      const v =
        typeof raw === "boolean"
          ? raw
          : typeof raw === "string"
            ? { on: true, off: false, true: true, false: false }[raw.toLowerCase()]
            : undefined;
      return v === undefined ? { error: "must be true or false" } : { value: v ? "on" : "off" };
    }
    case "enum": {
      const v = typeof raw === "string" ? raw.toLowerCase() : undefined;
      return v !== undefined && spec.allowed!.includes(v) ? { value: v } : { error: `must be one of: ${spec.allowed!.join(", ")}` };
    }
    case "string": {
      if (typeof raw !== "string" || !isTimeZone(raw)) return { error: "must be a time zone name such as UTC or Europe/Berlin" };
      return { value: raw };
    }
    case "list": {
      const items = Array.isArray(raw)
        ? raw
        : typeof raw === "string"
          ? raw
              .split(",")
              .map((s) => s.trim())
              .filter(Boolean)
          : undefined;
      if (!items || items.some((i) => typeof i !== "string" || !spec.allowed!.includes(i)))
        return { error: `must be a list of: ${spec.allowed!.join(", ")}` };
      // Each once, in the allowlist's order.
      return { value: spec.allowed!.filter((a) => items.includes(a)).join(",") };
    }
    case "integer":
    case "real": {
      const n = typeof raw === "number" || typeof raw === "string" ? inUnit(raw, spec.unit) : undefined;
      const { min, max } = boundsOf(spec, tier);
      const range = `${min ?? "-∞"} and ${max ?? "∞"}${spec.unit ? ` ${spec.unit}` : ""}`;
      if (n === undefined || !Number.isFinite(n)) return { error: `must be a number${unitWords(spec.unit)}` };
      if (spec.type === "integer" && !Number.isInteger(n)) return { error: `must be a whole number${spec.unit ? ` of ${spec.unit}` : ""}` };
      if ((min !== undefined && n < min) || (max !== undefined && n > max))
        return {
          error: `must be between ${range}${typeof spec.max === "function" || typeof spec.min === "function" ? ` on the ${tier} tier` : ""}`,
        };
      if (spec.blocks && n % 8 !== 0) return { error: "must be a multiple of 8 kB (PostgreSQL counts it in 8 kB pages)" };
      // -1 ("none") carries no unit.
      return { value: n < 0 ? String(n) : `${n}${spec.unit ?? ""}` };
    }
  }
}

/** A normalized value (or the agent's own notation: `30MB`, `1.1`) as the API shows it for `spec`. */
export function display(spec: ParameterSpec, value: string): number | string | boolean | string[] {
  switch (spec.type) {
    case "bool":
      return value === "on" || value === "true";
    case "list":
      return value === "" ? [] : value.split(",").map((s) => s.trim());
    case "integer":
    case "real":
      return inUnit(value, spec.unit) ?? Number(value);
    default:
      return value;
  }
}

/** Whether a parameter of `spec` needs pg_stat_statements loaded (a placeholder of its library otherwise). */
export const needsStatements = (spec: ParameterSpec) => spec.name.startsWith("pg_stat_statements.");
