import { create } from "@bufbuild/protobuf";
import { checkPaging, notFound, Validator } from "@dbaas/kit";
import {
  CreateReplicaResponseSchema,
  DeleteReplicaResponseSchema,
  GetReplicaResponseSchema,
  ListReplicasResponseSchema,
  PromoteReplicaResponseSchema,
  type CreateReplicaRequest,
  type CreateReplicaResponse,
  type DeleteReplicaRequest,
  type DeleteReplicaResponse,
  type GetReplicaRequest,
  type GetReplicaResponse,
  type ListReplicasRequest,
  type ListReplicasResponse,
  type PromoteReplicaRequest,
  type PromoteReplicaResponse,
} from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { findOwned, ownsLive } from "../db/databases.ts";
import { findReplica, listLiveReplicas } from "../db/replicas.ts";
import { toDatabase, toReplica } from "../mappers.ts";
import { validateNewDatabase } from "../new-database.ts";
import { promoteReplica as promote, provisionReplica, removeReplica } from "../replicas.ts";

/** A replica of a running database; tier and region default to the primary's; the name follows the rules of database names. */
export function createReplica(ctx: AppContext) {
  return async (req: CreateReplicaRequest): Promise<CreateReplicaResponse> => {
    const primary = await findOwned(ctx.pool, req.organizationId, req.databaseId);
    if (!primary) throw notFound("database");
    const region = req.region || primary.region;
    const tier = req.tier || primary.tier;
    const v = new Validator();
    const name = validateNewDatabase(v, { organizationId: req.organizationId, name: req.name, region, tier });
    v.throwIfAny();
    const row = await provisionReplica(ctx, { organizationId: req.organizationId, primaryId: primary.id, name, region, tier });
    return create(CreateReplicaResponseSchema, { replica: toReplica(row, ctx.cfg.databaseDomain) });
  };
}

/** A live database's live replicas, oldest first, a page at a time. */
export function listReplicas(ctx: AppContext) {
  return async (req: ListReplicasRequest): Promise<ListReplicasResponse> => {
    const v = new Validator();
    const { page, perPage } = checkPaging(v, req.page, req.perPage);
    v.throwIfAny();
    if (!(await ownsLive(ctx.pool, req.organizationId, req.databaseId))) throw notFound("database");
    const { rows, total } = await listLiveReplicas(ctx.pool, req.databaseId, perPage, (page - 1) * perPage);
    return create(ListReplicasResponseSchema, {
      replicas: rows.map((r) => toReplica(r, ctx.cfg.databaseDomain)),
      total,
      page,
      perPage,
    });
  };
}

export function getReplica(ctx: AppContext) {
  return async (req: GetReplicaRequest): Promise<GetReplicaResponse> => {
    const row = await findReplica(ctx.pool, req.organizationId, req.databaseId, req.replicaId);
    if (!row) throw notFound("replica");
    return create(GetReplicaResponseSchema, { replica: toReplica(row, ctx.cfg.databaseDomain) });
  };
}

/** Gone from the API at once, its instance purged, its slot dropped from the primary. */
export function deleteReplica(ctx: AppContext) {
  return async (req: DeleteReplicaRequest): Promise<DeleteReplicaResponse> => {
    await removeReplica(ctx, req.organizationId, req.databaseId, req.replicaId);
    return create(DeleteReplicaResponseSchema, {});
  };
}

/** A running replica made an independent database (a new "db-" record, starting); the replica is gone. */
export function promoteReplica(ctx: AppContext) {
  return async (req: PromoteReplicaRequest): Promise<PromoteReplicaResponse> => {
    const row = await promote(ctx, req.organizationId, req.databaseId, req.replicaId);
    return create(PromoteReplicaResponseSchema, { database: toDatabase(row, ctx.cfg.databaseDomain) });
  };
}
