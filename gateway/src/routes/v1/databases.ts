import { DATABASE_NAME_MAX_LENGTH, DATABASE_NAME_MIN_LENGTH } from "@dbaas/kit";
import { DATABASE_STATUSES, DEFAULT_POSTGRES_VERSION, POSTGRES_VERSIONS, REGIONS, TIERS } from "@dbaas/catalogue";
import type { CreateDatabaseResponse, Database, Operation } from "@dbaas/proto/databases";
import { Type } from "@sinclair/typebox";
import { created, file, list, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, displayText, oneOf, optional, pagination, PAGINATION, PAGINATION_QUERY, query, type Infer } from "../../schema.ts";
import {
  databaseStatusFields,
  databaseStatusName,
  iso,
  operationStatusName,
  operationTypeName,
  orNull,
  present,
  restoredFrom,
} from "../mappers.ts";
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

// The product serves PostgreSQL only; the record says so because clients of
// multi-engine services expect the field.
const TYPE = "postgres";

/** `restored_from` on a restored database; nothing on others (as `status_reason` is absent while there is none). */
function origin(db: Database) {
  const from = restoredFrom(db.restoredFrom);
  return from ? { restored_from: from } : {};
}

/**
 * The full record of GET and PATCH (and of a promoted replica, which answers
 * exactly as GET then shows it): the connection string arrives masked, and no
 * password exists here.
 */
export function databaseRecord(db: Database) {
  return {
    id: db.id,
    name: db.name,
    type: TYPE,
    region: db.region,
    tier: db.tier,
    version: db.version,
    status: databaseStatusName(db),
    ...(db.statusReason !== "" && { status_reason: db.statusReason }),
    host: db.host,
    port: db.port,
    database: db.database,
    username: db.username,
    connection_string: db.connectionString,
    created_at: iso(db.createdAt),
    updated_at: iso(db.updatedAt),
    ...origin(db),
  };
}

/**
 * docs/product.md, Databases: "List items carry only id, name, region, tier,
 * version, status, created_at" — a restored database's `restored_from` is on
 * its full record (GET), not here.
 */
function listItem(db: Database) {
  return {
    id: db.id,
    name: db.name,
    region: db.region,
    tier: db.tier,
    version: db.version,
    status: databaseStatusName(db),
    created_at: iso(db.createdAt),
  };
}

/**
 * A new database as create (and restore, which adds `restored_from`) answers:
 * the only response besides reset-password that carries the password, in the clear.
 */
export function createdRecord(res: Pick<CreateDatabaseResponse, "database" | "password" | "connectionString">) {
  const db = present(res.database, "database");
  return {
    id: db.id,
    name: db.name,
    type: TYPE,
    region: db.region,
    tier: db.tier,
    version: db.version,
    status: databaseStatusName(db),
    host: db.host,
    port: db.port,
    database: db.database,
    username: db.username,
    password: res.password,
    connection_string: res.connectionString,
    created_at: iso(db.createdAt),
  };
}

/** An operation; a failover's also says why and which members (`from`, `to`). */
export function operation(op: Operation) {
  return {
    id: op.id,
    type: operationTypeName(op.type),
    status: operationStatusName(op.status),
    started_at: iso(op.startedAt),
    finished_at: iso(op.finishedAt),
    error: orNull(op.error),
    ...(op.type === "failover" && { reason: op.reason, from: op.fromMember, to: op.toMember }),
  };
}

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
  return created(createdRecord(res));
}

export async function getDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getDatabase(target(call));
  return ok(databaseRecord(present(res.database, "database")));
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
  return list("databases", res.databases.map(listItem), { page, perPage, total: res.total });
}

export async function updateDatabase(call: AuthedCall<Infer<typeof updateBody>>): Promise<Reply> {
  const res = await call.ctx.databases.updateDatabase({ ...target(call), name: call.body.name });
  return ok(databaseRecord(present(res.database, "database")));
}

export async function deleteDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.databases.deleteDatabase(target(call));
  return noContent();
}

export async function startDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const db = present((await call.ctx.databases.startDatabase(target(call))).database, "database");
  return ok({ id: db.id, status: databaseStatusName(db) });
}

export async function stopDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const db = present((await call.ctx.databases.stopDatabase(target(call))).database, "database");
  return ok({ id: db.id, status: databaseStatusName(db) });
}

export async function restartDatabase(call: AuthedCall<unknown>): Promise<Reply> {
  const db = present((await call.ctx.databases.restartDatabase(target(call))).database, "database");
  return ok({ id: db.id, status: databaseStatusName(db) });
}

export async function resizeDatabase(call: AuthedCall<Infer<typeof resizeBody>>): Promise<Reply> {
  const res = await call.ctx.databases.resizeDatabase({ ...target(call), tier: call.body.tier });
  const db = present(res.database, "database");
  return ok({ id: db.id, tier: db.tier, status: databaseStatusName(db) });
}

export async function resetPassword(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.resetPassword(target(call));
  return ok({ password: res.password, connection_string: res.connectionString });
}

export async function listOperations(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.databases.listOperations({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    page,
    perPage,
  });
  return list("operations", res.operations.map(operation), { page, perPage, total: res.total });
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
  return ok({ regions: res.regions.map((r) => ({ code: r.code, name: r.name })) });
}

export async function listTiers({ ctx }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.databases.listTiers({});
  return ok({
    tiers: res.tiers.map((t) => ({
      name: t.name,
      vcpu: t.vcpu,
      memory_gb: t.memoryGb,
      storage_gb: t.storageGb,
      hourly_price: t.hourlyPrice,
    })),
  });
}

export async function listVersions({ ctx }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.databases.listVersions({});
  return ok({ versions: res.versions.map((v) => ({ version: v.version, default: v.isDefault })) });
}
