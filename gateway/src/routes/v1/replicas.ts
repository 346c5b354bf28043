import { DATABASE_NAME_MAX_LENGTH, DATABASE_NAME_MIN_LENGTH } from "@dbaas/kit";
import { created, list, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, displayText, optional, pagination, PAGINATION_QUERY, type Infer } from "../../schema.ts";
import { present } from "../mappers.ts";
import { DATABASE, REPLICA } from "../responses.ts";
import type { AuthedCall } from "../route.ts";
import { region, tier } from "./databases.ts";

export const listQuery = PAGINATION_QUERY;

export const createBody = body({
  name: displayText(
    DATABASE_NAME_MIN_LENGTH,
    DATABASE_NAME_MAX_LENGTH,
    `Name of the replica: the rules of a database's name, ${DATABASE_NAME_MIN_LENGTH}–${DATABASE_NAME_MAX_LENGTH} characters ` +
      "after trimming, unique among the primary's live replicas.",
  ),
  tier: optional(tier("Instance tier of the replica; default: the primary's")),
  region: optional(region("Region of the replica; default: the primary's")),
});

/** The primary (`:id`) and, for routes naming one, the replica (`:rid`), in the caller's organization. */
const target = (call: AuthedCall<unknown>) => ({
  organizationId: call.principal.organizationId,
  databaseId: call.params.id,
  replicaId: call.params.rid,
});

export async function listReplicas(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.databases.listReplicas({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    page,
    perPage,
  });
  return list("replicas", res.replicas.map(REPLICA.map), { page, perPage, total: res.total });
}

export async function createReplica(call: AuthedCall<Infer<typeof createBody>>): Promise<Reply> {
  const { body } = call;
  const res = await call.ctx.databases.createReplica({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    name: body.name,
    tier: body.tier ?? "",
    region: body.region ?? "",
  });
  return created(REPLICA.map(present(res.replica, "replica")));
}

export async function getReplica(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getReplica(target(call));
  return ok(REPLICA.map(present(res.replica, "replica")));
}

export async function deleteReplica(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.databases.deleteReplica(target(call));
  return noContent();
}

/** The new, independent database exactly as GET /v1/databases/{id} will show it: it keeps the primary's password. */
export async function promoteReplica(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.promoteReplica(target(call));
  return ok(DATABASE.map(present(res.database, "database")));
}
