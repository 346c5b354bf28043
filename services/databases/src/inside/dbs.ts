import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { checkPaging, conflict, invalidArgument, notFound, Validator } from "@dbaas/kit";
import { LogicalDbSchema, type LogicalDb } from "@dbaas/proto/inside";
import type { InstanceDb } from "@dbaas/proto/instance-admin";
import type { AppContext } from "../context.ts";
import { DATABASE_NAME, USERNAME } from "../mappers.ts";
import { askAgent, runningInside } from "./agent-admin.ts";
import { isPlainName, validateDbName, validateRoleName } from "./names.ts";

/** Logical databases per server (ours: docs/decisions.md, "Inside the database"), defaultdb included. */
export const MAX_DBS = 50;

const WHAT = "logical databases can be managed";

const toDb = (d: InstanceDb): LogicalDb =>
  create(LogicalDbSchema, { name: d.name, owner: d.owner, sizeBytes: d.sizeBytes, builtin: d.name === DATABASE_NAME });

export async function listDbs(ctx: AppContext, req: { organizationId: string; databaseId: string; page: number; perPage: number }) {
  const v = new Validator();
  const { page, perPage } = checkPaging(v, req.page, req.perPage);
  v.throwIfAny();
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const { dbs } = await askAgent(ctx, row.id, () => admin.listDbs({ databaseId: row.id }));
  return { dbs: dbs.slice((page - 1) * perPage, page * perPage).map(toDb), total: dbs.length, page, perPage };
}

/** CREATE DATABASE owned by `owner` (default dbadmin), a role of the server; 409 for a taken name. */
export async function createDb(ctx: AppContext, req: { organizationId: string; databaseId: string; name: string; owner: string }) {
  const owner = req.owner === "" ? USERNAME : req.owner;
  const v = new Validator();
  validateDbName(v, "name", req.name);
  validateRoleName(v, "owner", owner);
  v.throwIfAny();
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  try {
    const res = await askAgent(ctx, row.id, () => admin.createDb({ databaseId: row.id, name: req.name, owner, maxDbs: MAX_DBS }));
    ctx.log.info("logical database created", { database_id: row.id, db: req.name });
    return { db: toDb(res.db!) };
  } catch (err) {
    // The agent names the owner it could not find.
    if (err instanceof ConnectError && err.code === Code.InvalidArgument && err.rawMessage.startsWith("owner:"))
      throw invalidArgument([{ field: "owner", message: `no role ${owner} exists in the database` }]);
    throw err;
  }
}

/** DROP DATABASE; defaultdb cannot go, nor a database with connections (409 saying how many). */
export async function deleteDb(ctx: AppContext, req: { organizationId: string; databaseId: string; name: string }): Promise<void> {
  if (!isPlainName(req.name)) throw notFound("logical database");
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  if (req.name === DATABASE_NAME) throw conflict(`${DATABASE_NAME} is the database's own and cannot be deleted`);
  await askAgent(ctx, row.id, () => admin.dropDb({ databaseId: row.id, name: req.name }));
  ctx.log.info("logical database deleted", { database_id: row.id, db: req.name });
}
