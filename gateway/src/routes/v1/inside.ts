import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Type } from "@sinclair/typebox";
import { created, list, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, optional, pagination, PAGINATION, PAGINATION_QUERY, query, type Infer } from "../../schema.ts";
import { present } from "../mappers.ts";
import type { AuthedCall } from "../route.ts";
import {
  CONFIG,
  CREATED_ROLE,
  EXTENSION,
  EXTENSION_NAME_PATTERN,
  LOG_PAGE,
  LOGICAL_DB,
  PLAIN_NAME_PATTERN,
  QUERY_PAGE,
  ROLE,
} from "../responses-inside.ts";
import { NO_CONTROL_CHARACTERS } from "../../schema.ts";

/**
 * What a customer does inside a database (docs/product.md, Inside the database): roles and logical
 * databases. The databases service checks the rest (names it reserves, limits, the database's status).
 */

const plainName = (description: string) =>
  Type.String({
    pattern: PLAIN_NAME_PATTERN,
    maxLength: 63,
    description: `${description} A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_….`,
  });

export const listQuery = PAGINATION_QUERY;
export const createRoleBody = body({ name: plainName("The role's name.") });
export const createDbBody = body({
  name: plainName("The database's name."),
  owner: optional(plainName("The role that owns it; default dbadmin.")),
});

const target = (call: AuthedCall<unknown>) => ({ organizationId: call.principal.organizationId, databaseId: call.params.id! });

export async function listRoles(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.inside.listRoles({ ...target(call), page, perPage });
  return list("roles", res.roles.map(ROLE.map), { page, perPage, total: res.total });
}

export async function createRole(call: AuthedCall<Infer<typeof createRoleBody>>): Promise<Reply> {
  const res = await call.ctx.inside.createRole({ ...target(call), name: call.body.name });
  return created(CREATED_ROLE.map(res));
}

export async function deleteRole(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.inside.deleteRole({ ...target(call), name: call.params.name! });
  return noContent();
}

export async function resetRolePassword(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.inside.resetRolePassword({ ...target(call), name: call.params.name! });
  return ok(CREATED_ROLE.map(res));
}

export async function listDbs(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.inside.listDbs({ ...target(call), page, perPage });
  return list("dbs", res.dbs.map(LOGICAL_DB.map), { page, perPage, total: res.total });
}

export async function createDb(call: AuthedCall<Infer<typeof createDbBody>>): Promise<Reply> {
  const res = await call.ctx.inside.createDb({ ...target(call), name: call.body.name, owner: call.body.owner ?? "" });
  return created(LOGICAL_DB.map(present(res.db, "db")));
}

export async function deleteDb(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.inside.deleteDb({ ...target(call), name: call.params.name! });
  return noContent();
}

/** A parameter's new value, or null for its default; strings and lists bounded like every body's. */
const configValue = Type.Unsafe<JsonValue>({
  anyOf: [
    { type: "number" },
    { type: "string", maxLength: 200, pattern: NO_CONTROL_CHARACTERS },
    { type: "boolean" },
    { type: "null" },
    { type: "array", items: { type: "string", maxLength: 64, pattern: NO_CONTROL_CHARACTERS }, maxItems: 10 },
  ],
});

export const updateConfigBody = body({
  parameters: Type.Unsafe<Record<string, JsonValue>>({
    type: "object",
    description:
      "Parameter name → its new value (a number in its unit, a string with a unit such as `64MB` or `30s`, a boolean, a list), " +
      "or null for its default. All or nothing: one refused parameter refuses the change.",
    properties: {},
    additionalProperties: configValue,
    minProperties: 1,
    maxProperties: 50,
  }),
});

export async function getConfig(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.inside.getConfig(target(call));
  return ok(CONFIG.map(res));
}

export async function updateConfig(call: AuthedCall<Infer<typeof updateConfigBody>>): Promise<Reply> {
  const parameters = Object.fromEntries(Object.entries(call.body.parameters).map(([k, v]) => [k, fromJson(ValueSchema, v)]));
  const res = await call.ctx.inside.updateConfig({ ...target(call), parameters });
  return ok(CONFIG.map(res));
}

const dbParam = () => optional(plainName("The logical database; default defaultdb."));

export const extensionsQuery = query({ ...PAGINATION, db: dbParam() });
export const extensionQuery = query({ db: dbParam() });
export const installExtensionBody = body({
  name: Type.String({
    pattern: EXTENSION_NAME_PATTERN,
    maxLength: 63,
    description: "The extension (GET …/extensions marks those that can be installed: `allowed`).",
  }),
  db: dbParam(),
});

export async function listExtensions(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const db = (call.query.db as string | undefined) ?? "";
  const res = await call.ctx.inside.listExtensions({ ...target(call), db, page, perPage });
  return list("extensions", res.extensions.map(EXTENSION.map), { page, perPage, total: res.total });
}

export async function installExtension(call: AuthedCall<Infer<typeof installExtensionBody>>): Promise<Reply> {
  const res = await call.ctx.inside.installExtension({ ...target(call), name: call.body.name, db: call.body.db ?? "" });
  return created(EXTENSION.map(present(res.extension, "extension")));
}

export async function deleteExtension(call: AuthedCall<unknown>): Promise<Reply> {
  const db = (call.query.db as string | undefined) ?? "";
  await call.ctx.inside.deleteExtension({ ...target(call), name: call.params.name!, db });
  return noContent();
}

const SEVERITIES = ["DEBUG", "INFO", "LOG", "NOTICE", "WARNING", "ERROR", "FATAL", "PANIC"];

export const logsQuery = query({
  since: optional(Type.String({ format: "date-time", description: "Entries at or after this instant (RFC 3339)." })),
  until: optional(Type.String({ format: "date-time", description: "Entries before this instant (RFC 3339)." })),
  severity: optional(
    Type.String({
      enum: [...SEVERITIES, ...SEVERITIES.map((s) => s.toLowerCase())],
      description: "The least severe level returned: ERROR returns ERROR, FATAL and PANIC.",
    }),
  ),
  q: optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      pattern: NO_CONTROL_CHARACTERS,
      description: "Text in the message, detail, hint or statement (any case).",
    }),
  ),
  limit: optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: "At most this many entries (default 100)." })),
  cursor: optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      pattern: "^[A-Za-z0-9_-]+$",
      description: "`next_cursor` (entries after) or `prev_cursor` (entries before) of an earlier page.",
    }),
  ),
});

const at = (v: unknown) => (typeof v === "string" ? timestampFromDate(new Date(v)) : undefined);

export async function listLogs(call: AuthedCall<unknown>): Promise<Reply> {
  const q = call.query as { since?: string; until?: string; severity?: string; q?: string; limit?: number; cursor?: string };
  const since = at(q.since);
  const until = at(q.until);
  const res = await call.ctx.inside.listLogs({
    ...target(call),
    ...(since && { since }),
    ...(until && { until }),
    severity: q.severity ?? "",
    q: q.q ?? "",
    limit: q.limit ?? 100,
    cursor: q.cursor ?? "",
  });
  return ok(LOG_PAGE.map(res));
}

export const queriesQuery = query({
  order_by: optional(
    Type.String({ enum: ["total_time", "mean_time", "calls"], default: "total_time", description: "Descending; default total_time." }),
  ),
  limit: optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: "At most this many statements (default 20)." })),
});

export async function listQueries(call: AuthedCall<unknown>): Promise<Reply> {
  const q = call.query as { order_by?: string; limit?: number };
  const res = await call.ctx.inside.listQueries({ ...target(call), orderBy: q.order_by ?? "total_time", limit: q.limit ?? 20 });
  return ok(QUERY_PAGE.map(res));
}

export async function resetQueries(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.inside.resetQueries(target(call));
  return noContent();
}
