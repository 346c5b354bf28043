import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { checkPaging, invalidArgument, notFound, Validator } from "@dbaas/kit";
import { ExtensionSchema, type Extension } from "@dbaas/proto/inside";
import type { InstanceExtension } from "@dbaas/proto/instance-admin";
import type { AppContext } from "../context.ts";
import { askAgent, runningInside } from "./agent-admin.ts";
import { validateDbName } from "./names.ts";

/**
 * Extensions (docs/product.md, Inside the database): the server's binaries decide what exists
 * (pg_available_extensions), this allowlist what a customer may install — as superuser, through the
 * agent. Left out: untrusted languages (plpython3u, plperlu, pltclu: code as the server's OS user),
 * extensions reaching outside the server (dblink, postgres_fdw, file_fdw, adminpack), and those
 * exposing raw pages or internals to superusers only (pageinspect, pg_surgery, pg_walinspect, …).
 */
export const INSTALLABLE = [
  "autoinc",
  "bloom",
  "btree_gin",
  "btree_gist",
  "citext",
  "cube",
  "dict_int",
  "earthdistance",
  "fuzzystrmatch",
  "hstore",
  "insert_username",
  "intarray",
  "isn",
  "lo",
  "ltree",
  "moddatetime",
  "pg_buffercache",
  "pg_prewarm",
  "pg_stat_statements",
  "pg_trgm",
  "pgcrypto",
  "pgrowlocks",
  "pgstattuple",
  "seg",
  "tablefunc",
  "tcn",
  "tsm_system_rows",
  "tsm_system_time",
  "unaccent",
  "uuid-ossp",
] as const;

const ALLOWED = new Set<string>(INSTALLABLE);
const WHAT = "extensions can be managed";

const toExtension = (e: InstanceExtension): Extension =>
  create(ExtensionSchema, {
    name: e.name,
    defaultVersion: e.defaultVersion,
    installedVersion: e.installedVersion,
    installed: e.installedVersion !== "",
    trusted: e.trusted,
    allowed: ALLOWED.has(e.name),
    description: e.comment,
  });

/** The logical database a request names (defaultdb when empty); 422 on `db` for one that cannot exist. */
function dbOf(db: string): string {
  if (db === "") return "";
  const v = new Validator();
  validateDbName(v, "db", db);
  v.throwIfAny();
  return db;
}

/** The agent's NOT_FOUND for a logical database that does not exist, as 422 on `db`. */
function unknownDb(err: unknown): never {
  if (err instanceof ConnectError && err.code === Code.NotFound && err.rawMessage.startsWith("db:"))
    throw invalidArgument([{ field: "db", message: err.rawMessage.slice(4) }]);
  throw err;
}

export async function listExtensions(
  ctx: AppContext,
  req: { organizationId: string; databaseId: string; db: string; page: number; perPage: number },
) {
  const v = new Validator();
  const { page, perPage } = checkPaging(v, req.page, req.perPage);
  v.throwIfAny();
  const db = dbOf(req.db);
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const { extensions } = await askAgent(ctx, row.id, () => admin.listExtensions({ databaseId: row.id, db })).catch(unknownDb);
  return { extensions: extensions.slice((page - 1) * perPage, page * perPage).map(toExtension), total: extensions.length, page, perPage };
}

/** Installs one of the allowlist in the logical database (default defaultdb); any other name is 422 on `name`. */
export async function installExtension(ctx: AppContext, req: { organizationId: string; databaseId: string; name: string; db: string }) {
  if (!ALLOWED.has(req.name))
    throw invalidArgument([
      { field: "name", message: `is not an extension that can be installed; those that can: ${INSTALLABLE.join(", ")}` },
    ]);
  const db = dbOf(req.db);
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const res = await askAgent(ctx, row.id, () => admin.installExtension({ databaseId: row.id, db, name: req.name })).catch(unknownDb);
  ctx.log.info("extension installed", { database_id: row.id, extension: req.name, db: db || "defaultdb" });
  return { extension: toExtension(res.extension!) };
}

/** Drops an installed extension (not CASCADE: 409 while objects depend on it); one not installed is 404. */
export async function deleteExtension(ctx: AppContext, req: { organizationId: string; databaseId: string; name: string; db: string }) {
  if (!/^[a-z0-9_][a-z0-9_-]{0,62}$/.test(req.name)) throw notFound("extension");
  const db = dbOf(req.db);
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  await askAgent(ctx, row.id, () => admin.dropExtension({ databaseId: row.id, db, name: req.name })).catch(unknownDb);
  ctx.log.info("extension dropped", { database_id: row.id, extension: req.name, db: db || "defaultdb" });
}
