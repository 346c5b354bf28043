import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { conflict, invalidArgument, notFound, Validator } from "@dbaas/kit";
import type { Database } from "@dbaas/proto/databases";
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ConfigParameterSchema,
  DbRoleSchema,
  ExtensionSchema,
  InsideService,
  LogEntrySchema,
  LogicalDbSchema,
  QueryStatSchema,
  type ConfigParameter,
  type DbRole,
  type LogicalDb,
} from "@dbaas/proto/inside";
import { mergeParameters } from "../../../services/databases/src/inside/config.ts";
import { INSTALLABLE } from "../../../services/databases/src/inside/extensions.ts";
import { isPlainName, validateDbName, validateRoleName } from "../../../services/databases/src/inside/names.ts";
import { display, parameterSpec } from "../../../services/databases/src/inside/parameters.ts";
import { record, T0, type StubState } from "./stub-state.ts";

type Find = (org: string, id: string) => Promise<{ db: Database }>;

/** What the stub keeps inside each database, by database id: its roles and logical databases. */
interface Inside {
  roles: Map<string, DbRole>;
  dbs: Map<string, LogicalDb>;
  /** The overrides set, normalized as the service keeps them (`65536kB`, `on`). */
  config: Record<string, string>;
  /** Extensions installed in defaultdb. */
  extensions: Set<string>;
  /** Query statistics were reset. */
  queriesReset?: boolean;
}

const insides = new WeakMap<StubState, Map<string, Inside>>();

/** The inside of database `id` in the stub (made with dbadmin and defaultdb when first asked for). */
export function insideOf(state: StubState, id: string): Inside {
  let all = insides.get(state);
  if (!all) {
    all = new Map();
    insides.set(state, all);
  }
  let i = all.get(id);
  if (!i) {
    i = {
      roles: new Map([
        ["dbadmin", create(DbRoleSchema, { name: "dbadmin", login: true, createDb: true, createRole: true, builtin: true })],
      ]),
      dbs: new Map([["defaultdb", create(LogicalDbSchema, { name: "defaultdb", owner: "dbadmin", sizeBytes: 7_500_000n, builtin: true })]]),
      config: {},
      extensions: new Set(["plpgsql"]),
    };
    all.set(id, i);
  }
  return i;
}

/** What the stub's server offers: name, default version, trusted, on the allowlist. */
const STUB_EXTENSIONS = [
  ["pg_trgm", "1.6", true, true],
  ["plpgsql", "1.0", true, false],
  ["plpython3u", "1.0", false, false],
] as const;

function stubExtensions(i: Inside) {
  return STUB_EXTENSIONS.map(([name, version, trusted, allowed]) =>
    create(ExtensionSchema, {
      name,
      defaultVersion: version,
      installedVersion: i.extensions.has(name) ? version : "",
      installed: i.extensions.has(name),
      trusted,
      allowed,
      description: `the stub's ${name}`,
    }),
  );
}

/** Three parameters of the allowlist, as the service describes them on a micro database. */
const STUB_PARAMETERS = [
  { name: "work_mem", type: "integer", unit: "kB", min: 64, max: 262144, dflt: 1092, restart: false },
  { name: "max_connections", type: "integer", unit: "", min: 10, max: 50, dflt: 50, restart: true },
  { name: "jit", type: "bool", unit: "", dflt: true, restart: false },
] as const;

/** An override as the API shows it (the service's display of its normalized value). */
const shown = (name: string, value: string) => display(parameterSpec(name)!, value) as JsonValue;

/** The stub's three parameters, then any other parameter of the service's allowlist that was set. */
function stubConfig(i: Inside): ConfigParameter[] {
  const listed = STUB_PARAMETERS.map((p) =>
    create(ConfigParameterSchema, {
      name: p.name,
      value: fromJson(ValueSchema, p.name in i.config ? shown(p.name, i.config[p.name]!) : p.dflt),
      defaultValue: fromJson(ValueSchema, p.dflt),
      unit: p.unit,
      type: p.type,
      ...("min" in p && { min: p.min, max: p.max }),
      requiresRestart: p.restart,
      pendingRestart: p.restart && p.name in i.config,
      description: `the stub's ${p.name}`,
      overridden: p.name in i.config,
    }),
  );
  const others = Object.entries(i.config)
    .filter(([name]) => !STUB_PARAMETERS.some((p) => p.name === name))
    .map(([name, value]) => {
      const spec = parameterSpec(name)!;
      return create(ConfigParameterSchema, {
        name,
        value: fromJson(ValueSchema, shown(name, value)),
        defaultValue: fromJson(ValueSchema, display(spec, spec.pgDefault) as JsonValue),
        unit: spec.unit ?? "",
        type: spec.type,
        allowed: [...(spec.allowed ?? [])],
        requiresRestart: spec.restart,
        pendingRestart: spec.restart,
        description: spec.description,
        overridden: true,
      });
    });
  return [...listed, ...others];
}
export const STUB_MAX_ROLES = 50;

/** The stub server's log: four entries a second apart from T0, one a failed query. */
export const STUB_LOG = [
  { severity: "LOG", message: "database system is ready to accept connections", sqlState: "00000" },
  { severity: "ERROR", message: 'relation "no_such_table" does not exist', sqlState: "42P01", statement: "SELECT * FROM no_such_table" },
  { severity: "WARNING", message: "there is no transaction in progress", sqlState: "25P01" },
  { severity: "LOG", message: "checkpoint complete", sqlState: "00000" },
].map((e, i) =>
  create(LogEntrySchema, {
    ...e,
    time: timestampFromDate(new Date(T0.getTime() + i * 1000)),
    user: e.severity === "LOG" ? "" : "dbadmin",
    database: e.severity === "LOG" ? "" : "defaultdb",
    backendType: e.severity === "LOG" ? "checkpointer" : "client backend",
    pid: 100 + i,
  }),
);
const SEVERITY_ORDER = ["DEBUG", "INFO", "LOG", "NOTICE", "WARNING", "ERROR", "FATAL", "PANIC"];
/** A stub cursor is the index of an entry, after (`a<n>`) or before (`b<n>`) it. */
const STUB_CURSOR = /^([ab])(\d+)$/;

/** The service's own rules for names (names.ts): 422 naming the field, whatever the database's status. */
function checkNames(...checks: [validate: typeof validateRoleName, field: string, name: string][]): void {
  const v = new Validator();
  for (const [validate, field, name] of checks) validate(v, field, name);
  v.throwIfAny();
}

/** A name from a path that cannot name a role or logical database: unknown (404), as the service answers. */
function knownName(name: string, what: string): string {
  if (!isPlainName(name)) throw notFound(what);
  return name;
}

/** The service's check of a `db` naming a logical database (422 on `db`), before the database's status. */
function checkDb(db: string): void {
  if (db !== "") checkNames([validateDbName, "db", db]);
}

function page<T>(items: T[], req: { page: number; perPage: number }) {
  const p = req.page || 1;
  const pp = req.perPage || 20;
  return { items: items.slice((p - 1) * pp, p * pp), total: items.length, page: p, perPage: pp };
}

/**
 * InsideService as inside_service.proto states it, in memory: a database of another organization is
 * NOT_FOUND, one not running FAILED_PRECONDITION naming its status; names, the configuration's allowlist
 * and the extensions' allowlist checked by the service's own rules (inside/names.ts, config.ts,
 * extensions.ts), in the service's order (stubs-conform.test.ts compares): INVALID_ARGUMENT naming the
 * field, or NOT_FOUND for a path's name that cannot exist; a taken name ALREADY_EXISTS; dbadmin and defaultdb cannot go; at
 * most 50 roles. A role named `owns_things` stands for one that still owns objects.
 */
export function insideRoutes(state: StubState, find: Find) {
  const running = async (org: string, id: string, what: string) => {
    const { db } = await find(org, id);
    if (db.status !== "running") throw conflict(`the database is ${db.status}: ${what} only while it is running`);
    return insideOf(state, id);
  };
  const password = "a-generated-password-of-32-chars";
  return (router: ConnectRouter) =>
    router.service(InsideService, {
      async listRoles(req) {
        record(state, "listRoles", req);
        const i = await running(req.organizationId, req.databaseId, "roles can be managed");
        const { items, ...meta } = page(
          [...i.roles.values()].sort((a, b) => a.name.localeCompare(b.name)),
          req,
        );
        return { roles: items, ...meta };
      },
      async createRole(req) {
        record(state, "createRole", req);
        checkNames([validateRoleName, "name", req.name]);
        const i = await running(req.organizationId, req.databaseId, "roles can be managed");
        if (i.roles.has(req.name)) throw new ConnectError(`role "${req.name}" already exists`, Code.AlreadyExists);
        if (i.roles.size >= STUB_MAX_ROLES) throw conflict(`the database has ${i.roles.size} roles; at most ${STUB_MAX_ROLES} are allowed`);
        const role = create(DbRoleSchema, { name: req.name, login: true, createdAt: timestampFromDate(T0) });
        i.roles.set(req.name, role);
        return {
          role,
          password,
          connectionString: `postgresql://${req.name}:${password}@${req.databaseId}.db.example.test:6432/defaultdb?sslmode=require`,
        };
      },
      async deleteRole(req) {
        record(state, "deleteRole", req);
        knownName(req.name, "role");
        const i = await running(req.organizationId, req.databaseId, "roles can be managed");
        if (req.name === "dbadmin") throw conflict("dbadmin is the database's own role and cannot be deleted");
        if (!i.roles.has(req.name)) throw notFound("role");
        if (req.name === "owns_things") throw conflict(`role "owns_things" cannot be dropped because some objects depend on it`);
        i.roles.delete(req.name);
        return {};
      },
      async resetRolePassword(req) {
        record(state, "resetRolePassword", req);
        knownName(req.name, "role");
        const i = await running(req.organizationId, req.databaseId, "roles can be managed");
        const role = i.roles.get(req.name);
        if (!role) throw notFound("role");
        return {
          role,
          password,
          connectionString: `postgresql://${req.name}:${password}@${req.databaseId}.db.example.test:6432/defaultdb?sslmode=require`,
        };
      },
      async listDbs(req) {
        record(state, "listDbs", req);
        const i = await running(req.organizationId, req.databaseId, "logical databases can be managed");
        const { items, ...meta } = page(
          [...i.dbs.values()].sort((a, b) => a.name.localeCompare(b.name)),
          req,
        );
        return { dbs: items, ...meta };
      },
      async createDb(req) {
        record(state, "createDb", req);
        const owner = req.owner || "dbadmin";
        checkNames([validateDbName, "name", req.name], [validateRoleName, "owner", owner]);
        const i = await running(req.organizationId, req.databaseId, "logical databases can be managed");
        if (!i.roles.has(owner)) throw invalidArgument([{ field: "owner", message: `no role ${owner} exists in the database` }]);
        if (i.dbs.has(req.name)) throw new ConnectError(`database "${req.name}" already exists`, Code.AlreadyExists);
        const db = create(LogicalDbSchema, { name: req.name, owner, sizeBytes: 7_500_000n });
        i.dbs.set(req.name, db);
        return { db };
      },
      async getConfig(req) {
        record(state, "getConfig", req);
        await find(req.organizationId, req.databaseId);
        return { parameters: stubConfig(insideOf(state, req.databaseId)) };
      },
      async updateConfig(req) {
        record(state, "updateConfig", req);
        await find(req.organizationId, req.databaseId);
        const i = insideOf(state, req.databaseId);
        if (Object.keys(req.parameters).length === 0)
          throw invalidArgument([{ field: "parameters", message: "must name at least one parameter" }]);
        // The service's own check of the allowlist, values and bounds (a micro database's), all or nothing.
        const changes = Object.fromEntries(Object.entries(req.parameters).map(([k, v]) => [k, toJson(ValueSchema, v)]));
        const { parameters, violations } = mergeParameters(i.config, changes, "micro");
        if (violations.length > 0) throw invalidArgument(violations, "nothing was changed");
        i.config = parameters;
        return { parameters: stubConfig(i) };
      },
      async listExtensions(req) {
        record(state, "listExtensions", req);
        checkDb(req.db);
        const i = await running(req.organizationId, req.databaseId, "extensions can be managed");
        if (req.db !== "" && !i.dbs.has(req.db)) throw invalidArgument([{ field: "db", message: `database ${req.db} does not exist` }]);
        const { items, ...meta } = page(stubExtensions(i), req);
        return { extensions: items, ...meta };
      },
      async installExtension(req) {
        record(state, "installExtension", req);
        // The service's allowlist decides what may be installed; what the stub's server offers, what exists.
        if (!(INSTALLABLE as readonly string[]).includes(req.name))
          throw invalidArgument([{ field: "name", message: "is not an extension that can be installed" }]);
        checkDb(req.db);
        const i = await running(req.organizationId, req.databaseId, "extensions can be managed");
        if (!STUB_EXTENSIONS.some((e) => e[0] === req.name)) throw notFound("extension");
        i.extensions.add(req.name);
        return { extension: stubExtensions(i).find((e) => e.name === req.name)! };
      },
      async deleteExtension(req) {
        record(state, "deleteExtension", req);
        if (!/^[a-z0-9_][a-z0-9_-]{0,62}$/.test(req.name)) throw notFound("extension");
        checkDb(req.db);
        const i = await running(req.organizationId, req.databaseId, "extensions can be managed");
        if (!i.extensions.has(req.name)) throw notFound("extension");
        i.extensions.delete(req.name);
        return {};
      },
      async listLogs(req) {
        record(state, "listLogs", req);
        await find(req.organizationId, req.databaseId);
        const c = req.cursor === "" ? undefined : STUB_CURSOR.exec(req.cursor);
        if (req.cursor !== "" && !c) throw invalidArgument([{ field: "cursor", message: "is not a cursor this API gave" }]);
        const min = req.severity === "" ? 0 : SEVERITY_ORDER.indexOf(req.severity.toUpperCase());
        const limit = req.limit || 100;
        const indexed = STUB_LOG.map((e, i) => ({ e, i })).filter(
          ({ e, i }) =>
            SEVERITY_ORDER.indexOf(e.severity) >= min &&
            (req.q === "" || `${e.message} ${e.statement}`.toLowerCase().includes(req.q.toLowerCase())) &&
            (!c || (c[1] === "a" ? i >= Number(c[2]) : i < Number(c[2]))),
        );
        const picked = c?.[1] === "a" ? indexed.slice(0, limit) : indexed.slice(-limit);
        const last = picked.length ? picked[picked.length - 1]!.i + 1 : c ? Number(c[2]) : STUB_LOG.length;
        const first = picked.length ? picked[0]!.i : 0;
        return {
          entries: picked.map(({ e }) => e),
          nextCursor: `a${c?.[1] === "a" || picked.length ? last : STUB_LOG.length}`,
          prevCursor: first > 0 && picked.length < indexed.length ? `b${first}` : "",
        };
      },
      async listQueries(req) {
        record(state, "listQueries", req);
        const i = await running(req.organizationId, req.databaseId, "query statistics can be read");
        if (i.queriesReset) return { queries: [], statsReset: timestampFromDate(T0) };
        const queries = [
          create(QueryStatSchema, {
            queryId: "-123456789012345678",
            query: "SELECT * FROM orders WHERE id = $1",
            calls: 900n,
            totalTimeMs: 45,
            meanTimeMs: 0.05,
            rows: 900n,
            cacheHitRatio: 0.99,
            user: "dbadmin",
            database: "defaultdb",
          }),
          create(QueryStatSchema, {
            queryId: "42",
            query: "SELECT count(*) FROM orders",
            calls: 3n,
            totalTimeMs: 1500,
            meanTimeMs: 500,
            rows: 3n,
            user: "dbadmin",
            database: "defaultdb",
          }),
        ];
        const key = {
          total_time: (q: (typeof queries)[number]) => q.totalTimeMs,
          mean_time: (q: (typeof queries)[number]) => q.meanTimeMs,
          calls: (q: (typeof queries)[number]) => Number(q.calls),
        }[(req.orderBy || "total_time") as "total_time"];
        if (!key) throw invalidArgument([{ field: "order_by", message: "must be one of: total_time, mean_time, calls" }]);
        return { queries: queries.sort((a, b) => key(b) - key(a)).slice(0, req.limit || 20), statsReset: timestampFromDate(T0) };
      },
      async resetQueries(req) {
        record(state, "resetQueries", req);
        const i = await running(req.organizationId, req.databaseId, "query statistics can be reset");
        i.queriesReset = true;
        return {};
      },
      async deleteDb(req) {
        record(state, "deleteDb", req);
        knownName(req.name, "logical database");
        const i = await running(req.organizationId, req.databaseId, "logical databases can be managed");
        if (req.name === "defaultdb") throw conflict("defaultdb is the database's own and cannot be deleted");
        if (!i.dbs.has(req.name)) throw notFound("logical database");
        i.dbs.delete(req.name);
        return {};
      },
    });
}
