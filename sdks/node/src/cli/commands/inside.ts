import type { Schemas } from "../../types.ts";
import { type Args, type Command, type Context, type Group, need, optional, outcome, print, say, UsageError } from "../command.ts";
import type { Column } from "../output.ts";

// `dbaas databases roles|dbs …`: inside a database (roles and logical databases), read from and changed on the
// running server.

type Role = Schemas["Role"];
type LogicalDb = Schemas["LogicalDb"];
type Extension = Schemas["Extension"];

const EXTENSION_COLUMNS: Column<Extension>[] = [
  ["name", (e) => e.name],
  ["default_version", (e) => e.default_version],
  ["installed", (e) => e.installed_version ?? ""],
  ["trusted", (e) => e.trusted],
  ["allowed", (e) => e.allowed],
];

const DB_OPTION = { db: { type: "string" as const, value: "DB", description: "The logical database (default defaultdb)" } };
type ConfigParameter = Schemas["Config"]["parameters"][number];

const shown = (v: unknown) => (Array.isArray(v) ? v.join(",") : v === null || v === undefined ? "" : String(v));

const CONFIG_COLUMNS: Column<ConfigParameter>[] = [
  ["name", (p) => p.name],
  ["value", (p) => shown(p.value)],
  ["default", (p) => shown(p.default)],
  ["unit", (p) => p.unit ?? ""],
  ["restart", (p) => (p.pending_restart ? "pending" : p.requires_restart ? "needed" : "")],
];

/** What `config set`/`reset` print: the changed parameters, and a word on what waits for a restart. */
function printChanged(ctx: Context, config: Schemas["Config"], names: string[]) {
  const changed = config.parameters.filter((p) => names.includes(p.name));
  if (ctx.output === "json") print(ctx, config);
  else print(ctx, changed, CONFIG_COLUMNS);
  const pending = changed.filter((p) => p.pending_restart).map((p) => p.name);
  if (pending.length > 0) say(ctx, `\nPending a restart ('dbaas databases restart'): ${pending.join(", ")}.`);
}

const ROLE_COLUMNS: Column<Role>[] = [
  ["name", (r) => r.name],
  ["login", (r) => r.login],
  ["create_db", (r) => r.create_db],
  ["create_role", (r) => r.create_role],
  ["builtin", (r) => r.builtin],
  ["created", (r) => r.created_at ?? ""],
];

const DB_COLUMNS: Column<LogicalDb>[] = [
  ["name", (d) => d.name],
  ["owner", (d) => d.owner],
  ["size_bytes", (d) => d.size_bytes],
  ["builtin", (d) => d.builtin],
];

const databaseId = (args: Args) => args.positionals[0]!;
const name = (args: Args) => args.positionals[1]!;

export const roles: Group = {
  summary: "Roles of a database: LOGIN roles, never superuser; passwords shown once",
  commands: {
    list: {
      summary: "List a database's roles (every page), dbadmin included",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas databases roles list db-abc123", "dbaas databases roles list db-abc123 -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.roles.list(databaseId(args)).all(), ROLE_COLUMNS);
      },
    },
    create: {
      summary: "Create a role with a generated password (shown this once)",
      usage: "<database-id> --name NAME",
      args: ["database-id"],
      options: { name: { type: "string", value: "NAME", description: "A plain identifier: lowercase letters, digits and _, at most 63" } },
      examples: ["dbaas databases roles create db-abc123 --name bi_reader", "dbaas databases roles create db-abc123 --name app -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.roles.create(databaseId(args), { name: need(args, "name") }));
        say(ctx, "\nThe password is shown this once: keep it (or 'dbaas databases roles reset-password' later).");
      },
    },
    delete: {
      summary: "Drop a role and end its sessions (refused while it owns objects)",
      usage: "<database-id> <role>",
      args: ["database-id", "role"],
      examples: ["dbaas databases roles delete db-abc123 bi_reader"],
      async run(ctx, args) {
        await ctx.client.roles.delete(databaseId(args), name(args));
        outcome(ctx, { name: name(args), deleted: true }, `Deleted role ${name(args)}.`);
      },
    },
    "reset-password": {
      summary: "Give a role a new password (shown this once); the old one and its sessions end at once",
      usage: "<database-id> <role>",
      args: ["database-id", "role"],
      examples: ["dbaas databases roles reset-password db-abc123 bi_reader"],
      async run(ctx, args) {
        print(ctx, await ctx.client.roles.resetPassword(databaseId(args), name(args)));
        say(ctx, "\nThe password is shown this once.");
      },
    },
  },
};

export const dbs: Group = {
  summary: "Logical databases of a database's server (defaultdb and the ones you add)",
  commands: {
    list: {
      summary: "List the server's logical databases (every page)",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas databases dbs list db-abc123", "dbaas databases dbs list db-abc123 -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.dbs.list(databaseId(args)).all(), DB_COLUMNS);
      },
    },
    create: {
      summary: "Create a logical database owned by a role (default dbadmin)",
      usage: "<database-id> --name NAME [--owner ROLE]",
      args: ["database-id"],
      options: {
        name: { type: "string", value: "NAME", description: "A plain identifier: lowercase letters, digits and _, at most 63" },
        owner: { type: "string", value: "ROLE", description: "The role that owns it (default dbadmin)" },
      },
      examples: ["dbaas databases dbs create db-abc123 --name analytics", "dbaas databases dbs create db-abc123 --name app --owner app"],
      async run(ctx, args) {
        const owner = optional(args, "owner");
        print(ctx, await ctx.client.dbs.create(databaseId(args), { name: need(args, "name"), ...(owner && { owner }) }));
      },
    },
    delete: {
      summary: "Drop a logical database (refused for defaultdb and while it has connections)",
      usage: "<database-id> <name>",
      args: ["database-id", "name"],
      examples: ["dbaas databases dbs delete db-abc123 analytics"],
      async run(ctx, args) {
        await ctx.client.dbs.delete(databaseId(args), name(args));
        outcome(ctx, { name: name(args), deleted: true }, `Deleted database ${name(args)}.`);
      },
    },
  },
};

export const config: Group = {
  summary: "Configuration of a database: parameters of an allowlist, checked against its tier",
  commands: {
    get: {
      summary: "Show every parameter that can be changed: value, default, unit and whether a restart is needed or pending",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas databases config get db-abc123", "dbaas databases config get db-abc123 -o json"],
      async run(ctx, args) {
        const res = await ctx.client.config.get(databaseId(args));
        if (ctx.output === "json") print(ctx, res);
        else print(ctx, res.parameters, CONFIG_COLUMNS);
      },
    },
    set: {
      summary: "Change parameters, all or nothing (NAME=VALUE; values may carry units: 64MB, 30s)",
      usage: "<database-id> NAME=VALUE [NAME=VALUE …]",
      args: ["database-id"],
      rest: true,
      examples: [
        "dbaas databases config set db-abc123 work_mem=64MB statement_timeout=30s",
        "dbaas databases config set db-abc123 max_connections=40 -o json",
      ],
      async run(ctx, args) {
        const pairs = args.positionals.slice(1);
        if (pairs.length === 0) throw new UsageError("name at least one NAME=VALUE");
        const parameters: Record<string, string> = {};
        for (const pair of pairs) {
          const at = pair.indexOf("=");
          if (at <= 0) throw new UsageError(`'${pair}' is not NAME=VALUE`);
          parameters[pair.slice(0, at)] = pair.slice(at + 1);
        }
        printChanged(ctx, await ctx.client.config.update(databaseId(args), { parameters }), Object.keys(parameters));
      },
    },
    reset: {
      summary: "Set parameters back to their defaults",
      usage: "<database-id> NAME [NAME …]",
      args: ["database-id"],
      rest: true,
      examples: ["dbaas databases config reset db-abc123 work_mem"],
      async run(ctx, args) {
        const names = args.positionals.slice(1);
        if (names.length === 0) throw new UsageError("name at least one parameter");
        const parameters = Object.fromEntries(names.map((n) => [n, null]));
        printChanged(ctx, await ctx.client.config.update(databaseId(args), { parameters }), names);
      },
    },
  },
};

export const extensions: Group = {
  summary: "Extensions of a database's server: those of the allowlist installed as superuser",
  commands: {
    list: {
      summary: "List what the server offers, what a logical database has, and what can be installed (every page)",
      usage: "<database-id> [--db DB] [--installed]",
      args: ["database-id"],
      options: { ...DB_OPTION, installed: { type: "boolean", description: "Only the installed ones" } },
      examples: ["dbaas databases extensions list db-abc123", "dbaas databases extensions list db-abc123 --installed --db analytics"],
      async run(ctx, args) {
        const db = optional(args, "db");
        const all = await ctx.client.extensions.list(databaseId(args), db ? { db } : undefined).all();
        print(ctx, args.values.installed ? all.filter((e) => e.installed) : all, EXTENSION_COLUMNS);
      },
    },
    install: {
      summary: "Install an extension of the allowlist (pg_trgm, pgcrypto, uuid-ossp, …)",
      usage: "<database-id> <name> [--db DB]",
      args: ["database-id", "name"],
      options: DB_OPTION,
      examples: [
        "dbaas databases extensions install db-abc123 pg_trgm",
        "dbaas databases extensions install db-abc123 citext --db analytics",
      ],
      async run(ctx, args) {
        const db = optional(args, "db");
        print(ctx, await ctx.client.extensions.install(databaseId(args), { name: name(args), ...(db && { db }) }));
      },
    },
    delete: {
      summary: "Drop an extension (refused while objects depend on it)",
      usage: "<database-id> <name> [--db DB]",
      args: ["database-id", "name"],
      options: DB_OPTION,
      examples: ["dbaas databases extensions delete db-abc123 pg_trgm"],
      async run(ctx, args) {
        const db = optional(args, "db");
        await ctx.client.extensions.delete(databaseId(args), name(args), db ? { db } : undefined);
        outcome(ctx, { name: name(args), deleted: true }, `Dropped extension ${name(args)}.`);
      },
    },
  },
};

type LogEntry = Schemas["LogPage"]["entries"][number];
type QueryStat = Schemas["QueryPage"]["queries"][number];

/** One log entry as a line: time, severity, SQLSTATE, who, the message, and the statement that failed. */
export function logLine(e: LogEntry): string {
  const who = e.user ? ` ${e.user}@${e.database ?? ""}` : ` [${e.backend_type}]`;
  const state = e.sql_state ? ` ${e.sql_state}` : "";
  const more = [e.detail && `DETAIL: ${e.detail}`, e.hint && `HINT: ${e.hint}`, e.statement && `STATEMENT: ${e.statement}`].filter(Boolean);
  return `${e.time} ${e.severity}${state}${who}: ${e.message}${more.map((m) => `\n    ${m}`).join("")}`;
}

const QUERY_COLUMNS: Column<QueryStat>[] = [
  ["calls", (q) => q.calls],
  ["total_ms", (q) => q.total_time_ms.toFixed(1)],
  ["mean_ms", (q) => q.mean_time_ms.toFixed(2)],
  ["rows", (q) => q.rows],
  ["hit_ratio", (q) => (q.cache_hit_ratio === null ? "" : q.cache_hit_ratio.toFixed(3))],
  ["user", (q) => q.user],
  ["query", (q) => (q.query.length > 80 ? `${q.query.slice(0, 79)}…` : q.query).replace(/\s+/g, " ")],
];

const positiveInt = (args: Args, name: string): number | undefined => {
  const v = optional(args, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new UsageError(`--${name} must be a positive whole number`);
  return Number(v);
};

export const logs: Command = {
  summary: "Show the server's log, newest last (filters: severity and worse, text, time); --follow tails it",
  usage: "<database-id> [--severity LEVEL] [--search TEXT] [--since TIME] [--until TIME] [--limit N] [--follow]",
  args: ["database-id"],
  options: {
    severity: {
      type: "string",
      value: "LEVEL",
      description: "This level and worse: DEBUG, INFO, LOG, NOTICE, WARNING, ERROR, FATAL, PANIC",
    },
    search: { type: "string", value: "TEXT", description: "Text in the message, detail, hint or statement (any case)" },
    since: { type: "string", value: "TIME", description: "Entries at or after this instant (RFC 3339)" },
    until: { type: "string", value: "TIME", description: "Entries before this instant (RFC 3339)" },
    limit: { type: "string", value: "N", description: "At most N entries (default 100; with --follow, the first page)" },
    follow: { type: "boolean", short: "f", description: "Keep printing new entries as they are written (Ctrl-C to stop)" },
  },
  examples: [
    "dbaas databases logs db-abc123",
    "dbaas databases logs db-abc123 --severity error --search no_such_table",
    "dbaas databases logs db-abc123 --follow",
    "dbaas databases logs db-abc123 --since 2026-01-01T00:00:00Z -o json",
  ],
  async run(ctx, args) {
    const id = databaseId(args);
    const limit = positiveInt(args, "limit");
    const query = {
      ...(optional(args, "severity") && { severity: optional(args, "severity")!.toUpperCase() as "ERROR" }),
      ...(optional(args, "search") && { q: optional(args, "search")! }),
      ...(optional(args, "since") && { since: optional(args, "since")! }),
      ...(optional(args, "until") && { until: optional(args, "until")! }),
      ...(limit && { limit }),
    };
    const line = (e: LogEntry) => ctx.stdout.write(ctx.output === "json" ? `${JSON.stringify(e)}\n` : `${logLine(e)}\n`);
    if (!args.values.follow) {
      const page = await ctx.client.logs.list(id, query);
      if (ctx.output === "json") print(ctx, page);
      else for (const e of page.entries) line(e);
      return;
    }
    // Until Ctrl-C: one JSON object a line with -o json (a stream), else one entry a line.
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    try {
      const intervalMs = Number(ctx.env.DBAAS_FOLLOW_INTERVAL_MS) > 0 ? Number(ctx.env.DBAAS_FOLLOW_INTERVAL_MS) : undefined;
      for await (const e of ctx.client.logs.follow(id, query, { signal: stop.signal, ...(intervalMs && { intervalMs }) })) line(e);
    } catch (err) {
      if (!stop.signal.aborted) throw err;
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  },
};

export const queries: Group = {
  summary: "Query insights (pg_stat_statements): your statements, normalized, slowest or most frequent first",
  commands: {
    list: {
      summary: "List statements by total time (default), mean time or calls",
      usage: "<database-id> [--order-by total_time|mean_time|calls] [--limit N]",
      args: ["database-id"],
      options: {
        "order-by": { type: "string", value: "ORDER", description: "total_time (default), mean_time or calls" },
        limit: { type: "string", value: "N", description: "At most N statements (default 20, at most 100)" },
      },
      examples: ["dbaas databases queries list db-abc123", "dbaas databases queries list db-abc123 --order-by calls --limit 5 -o json"],
      async run(ctx, args) {
        const orderBy = optional(args, "order-by");
        if (orderBy !== undefined && !["total_time", "mean_time", "calls"].includes(orderBy))
          throw new UsageError("--order-by must be total_time, mean_time or calls");
        const limit = positiveInt(args, "limit");
        const res = await ctx.client.queries.list(databaseId(args), {
          ...(orderBy && { order_by: orderBy as "calls" }),
          ...(limit && { limit }),
        });
        if (ctx.output === "json") print(ctx, res);
        else print(ctx, res.queries, QUERY_COLUMNS);
      },
    },
    reset: {
      summary: "Start the statistics again from nothing",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas databases queries reset db-abc123"],
      async run(ctx, args) {
        await ctx.client.queries.reset(databaseId(args));
        outcome(ctx, { reset: true }, "Query statistics reset.");
      },
    },
  },
};
