import { create } from "@bufbuild/protobuf";
import { checkPaging, Validator, notFound } from "@dbaas/kit";
import { ListOperationsResponseSchema, type ListOperationsRequest, type ListOperationsResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { ownsLive } from "../db/databases.ts";
import { listOperations as listRows } from "../db/operations.ts";
import { toOperation } from "../mappers.ts";

/** A live database's operations, newest first, a page at a time. */
export function listOperations(ctx: AppContext) {
  return async (req: ListOperationsRequest): Promise<ListOperationsResponse> => {
    const v = new Validator();
    const { page, perPage } = checkPaging(v, req.page, req.perPage);
    v.throwIfAny();
    if (!(await ownsLive(ctx.pool, req.organizationId, req.databaseId))) throw notFound("database");
    const { rows, total } = await listRows(ctx.pool, req.databaseId, perPage, (page - 1) * perPage);
    return create(ListOperationsResponseSchema, { operations: rows.map(toOperation), total, page, perPage });
  };
}
