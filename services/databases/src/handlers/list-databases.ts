import { create } from "@bufbuild/protobuf";
import { checkPaging, Validator } from "@dbaas/kit";
import { DATABASE_STATUSES, REGIONS } from "@dbaas/catalogue";
import { ListDatabasesResponseSchema, type ListDatabasesRequest, type ListDatabasesResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { listLive } from "../db/databases.ts";
import { requestedStatus, toDatabase } from "../mappers.ts";

/** The organization's live databases, newest first, optionally of one status and region, a page at a time. */
export function listDatabases(ctx: AppContext) {
  return async (req: ListDatabasesRequest): Promise<ListDatabasesResponse> => {
    const v = new Validator();
    const { page, perPage } = checkPaging(v, req.page, req.perPage);
    const status = requestedStatus(req);
    if (status !== "") v.oneOf("status", status, DATABASE_STATUSES);
    if (req.region !== "")
      v.oneOf(
        "region",
        req.region,
        REGIONS.map((r) => r.code),
      );
    v.throwIfAny();
    const { rows, total } = await listLive(
      ctx.pool,
      { organizationId: req.organizationId, status, region: req.region },
      perPage,
      (page - 1) * perPage,
    );
    return create(ListDatabasesResponseSchema, {
      databases: rows.map((r) => toDatabase(r, ctx.cfg.databaseDomain)),
      total,
      page,
      perPage,
    });
  };
}
