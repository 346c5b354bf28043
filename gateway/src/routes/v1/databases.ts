import { DATABASE_NAME_MAX_LENGTH, DATABASE_NAME_MIN_LENGTH } from "@dbaas/kit";
import { DATABASE_STATUSES, DEFAULT_POSTGRES_VERSION, POSTGRES_VERSIONS, REGIONS, TIERS } from "@dbaas/catalogue";
import { Type } from "@sinclair/typebox";
import { created, file, list, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, displayText, oneOf, optional, pagination, PAGINATION, PAGINATION_QUERY, query, type Infer } from "../../schema.ts";
import { databaseStatusFields, present } from "../mappers.ts";
import {
  CREATED_DATABASE,
  CREDENTIALS,
  DATABASE,
  DATABASE_LIST_ITEM,
  DATABASE_STATUS,
  OPERATION,
  REGIONS_LIST,
  RESIZED_DATABASE,
  TIERS_LIST,
  VERSIONS_LIST,
} from "../responses.ts";
import type { AuthedCall } from "../route.ts";

const REGION_CODES = REGIONS.map((r) => r.code);
const TIER_NAMES = TIERS.map((t) => t.name);

export const databaseName = (description: string) =>
  displayText(
    DATABASE_NAME_MIN_LENGTH,
    DATABASE_NAME_MAX_LENGTH,
    `${description} ${DATABASE_NAME_MIN_LENGTH}–${DATABASE_NAME_MAX_LENGTH} characters after trimming, unique among the organization's live databases.`,
  );
export const tier = (description: string) => oneOf(TIER_NAMES, `${description} (GET /v1/tiers).`);
export const region = (description: string) => oneOf(REGION_CODES, `${description} (GET /v1/regions).`);

export const createBody = body({
  name: databaseName("Name of the database."),
  region: region("Region code"),
  tier: tier("Instance tier"),
  version: optional(
    oneOf(POSTGRES_VERSIONS, `PostgreSQL major version (GET /v1/versions lists those with capacity); default ${DEFAULT_POSTGRES_VERSION}.`),
  ),
  standbys: optional(
    Type.Integer({
      minimum: 0,
      maximum: 2,
      description:
        "Standbys on other hosts of the region (high availability; GET …/high-availability), default 0; " +
        "409 when the region has too few hosts, 402 without a payment method in good standing.",
    }),
  ),
  synchronous: optional(Type.Boolean({ description: "Commit only once a standby has the WAL (needs standbys ≥ 1), default false." })),
});

export const updateBody = body({
  name: optional(databaseName("New name.")),
});

export const resizeBody = body({
  tier: tier("The new instance tier"),
});

export const listQuery = query({
  ...PAGINATION,
  status: optional(oneOf(DATABASE_STATUSES, "Only databases in this status.")),
  region: optional(oneOf(REGION_CODES, "Only databases in this region.")),
});

export const operationsQuery = PAGINATION_QUERY;

const target = (call: AuthedCall<unknown>) => ({ organizationId: call.principal.organizationId, id: call.params.id });

export async function createDatabase(call: AuthedCall<Infer<typeof createBody>>): Promise<Reply> {
  const { body } = call;
  const res = await call.ctx.databases.createDatabase({
    organizationId: call.principal.organizationId,
    name: body.name,
    region: body.region,
    tier: body.tier,
    version: body.version ?? "",
    standbys: body.standbys ?? 0,
    synchronous: body.synchronous ?? false,
  });
  return created(CREATED_DATABASE.map(res));
}

export async function getDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getDatabase(target(call));
  return ok(DATABASE.map(present(res.database, "database")));
}

export async function listDatabases(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const status = call.query.status as (typeof DATABASE_STATUSES)[number] | undefined;
  const res = await call.ctx.databases.listDatabases({
    organizationId: call.principal.organizationId,
    page,
    perPage,
    ...(status !== undefined && databaseStatusFields(status)),
    region: (call.query.region as string | undefined) ?? "",
  });
  return list("databases", res.databases.map(DATABASE_LIST_ITEM.map), { page, perPage, total: res.total });
}

export async function updateDatabase(call: AuthedCall<Infer<typeof updateBody>>): Promise<Reply> {
  const res = await call.ctx.databases.updateDatabase({ ...target(call), name: call.body.name });
  return ok(DATABASE.map(present(res.database, "database")));
}

export async function deleteDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.databases.deleteDatabase(target(call));
  return noContent();
}

export async function startDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const db = present((await call.ctx.databases.startDatabase(target(call))).database, "database");
  return ok(DATABASE_STATUS.map(db));
}

export async function stopDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const db = present((await call.ctx.databases.stopDatabase(target(call))).database, "database");
  return ok(DATABASE_STATUS.map(db));
}

export async function restartDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const db = present((await call.ctx.databases.restartDatabase(target(call))).database, "database");
  return ok(DATABASE_STATUS.map(db));
}

export async function resizeDatabase(call: AuthedCall<Infer<typeof resizeBody>>): Promise<Reply> {
  const res = await call.ctx.databases.resizeDatabase({ ...target(call), tier: call.body.tier });
  return ok(RESIZED_DATABASE.map(present(res.database, "database")));
}

export async function resetPassword(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.resetPassword(target(call));
  return ok(CREDENTIALS.map(res));
}

export async function listOperations(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.databases.listOperations({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    page,
    perPage,
  });
  return list("operations", res.operations.map(OPERATION.map), { page, perPage, total: res.total });
}

/**
 * The CA certificate as a PEM file rather than JSON: it is what
 * `sslrootcert=` and `curl -o ca.pem` want, with nothing to unwrap.
 */
export async function getCaCertificate(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getCaCertificate(target(call));
  return file("application/x-pem-file", "ca.pem", res.pem);
}

export async function listRegions({ ctx }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.databases.listRegions({});
  return ok(REGIONS_LIST.map(res));
}

export async function listTiers({ ctx }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.databases.listTiers({});
  return ok(TIERS_LIST.map(res));
}

export async function listVersions({ ctx }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.databases.listVersions({});
  return ok(VERSIONS_LIST.map(res));
}
