import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { maxPoolSize, POOLER_MODES, TIERS } from "@dbaas/catalogue";
import { Type } from "@sinclair/typebox";
import { created, list, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, oneOf, optional, pagination, PAGINATION_QUERY, text, timestamp, type Infer } from "../../schema.ts";
import { present } from "../mappers.ts";
import { POOLER, TRUSTED_SOURCE } from "../responses.ts";
import type { AuthedCall } from "../route.ts";

export const listQuery = PAGINATION_QUERY;

/** An IPv6 network in its longest written form with a prefix is 43 characters; room for spaces the service trims. */
const CIDR_MAX_LENGTH = 64;

export const createBody = body({
  cidr: text(
    CIDR_MAX_LENGTH,
    "An IPv4 or IPv6 address (admitted alone: /32, /128) or network in CIDR form, e.g. `203.0.113.0/24` or `2001:db8::/32`. " +
      "Stored in network form; host bits set (`10.1.2.3/8`) are a 422 suggesting the network (`10.0.0.0/8`).",
    1,
  ),
  description: optional(text(255, "What the entry is for (at most 255 characters), e.g. `office` or `CI runner`.")),
  expires_at: optional(timestamp("When the entry stops admitting and leaves the list (in the future); default: never.")),
});

export const updatePoolerBody = body({
  enabled: optional(Type.Boolean({ description: "false stops the pooler (its port refuses connections); true starts it again." })),
  mode: optional(
    oneOf(
      POOLER_MODES,
      "`transaction` (default): a server connection per transaction, so SET, LISTEN, advisory locks held across " +
        "transactions and protocol-level prepared statements do not carry over; `session`: one per client connection.",
    ),
  ),
  pool_size: optional(
    Type.Integer({
      minimum: 1,
      // The largest tier's bound; the databases service holds a database to its own tier's (a 422 naming it).
      maximum: Math.max(...TIERS.map((t) => maxPoolSize(t.name))),
      description: "Server connections per database and user: 1 … the tier's max_connections − 5.",
    }),
  ),
});

const target = (call: AuthedCall<unknown>) => ({ organizationId: call.principal.organizationId, databaseId: call.params.id });

export async function listTrustedSources(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.databases.listTrustedSources({ ...target(call), page, perPage });
  return list("trusted_sources", res.trustedSources.map(TRUSTED_SOURCE.map), { page, perPage, total: res.total });
}

export async function createTrustedSource(call: AuthedCall<Infer<typeof createBody>>): Promise<Reply> {
  const { body } = call;
  const res = await call.ctx.databases.createTrustedSource({
    ...target(call),
    cidr: body.cidr,
    description: body.description ?? "",
    expiresAt: body.expires_at === undefined ? undefined : timestampFromDate(new Date(body.expires_at)),
  });
  return created(TRUSTED_SOURCE.map(present(res.trustedSource, "trusted source")));
}

export async function deleteTrustedSource(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.databases.deleteTrustedSource({ ...target(call), trustedSourceId: call.params.tsid });
  return noContent();
}

export async function getPooler(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getPooler(target(call));
  return ok(POOLER.map(present(res.pooler, "pooler")));
}

export async function updatePooler(call: AuthedCall<Infer<typeof updatePoolerBody>>): Promise<Reply> {
  const { body } = call;
  const res = await call.ctx.databases.updatePooler({
    ...target(call),
    ...(body.enabled !== undefined && { enabled: body.enabled }),
    ...(body.mode !== undefined && { mode: body.mode }),
    ...(body.pool_size !== undefined && { poolSize: body.pool_size }),
  });
  return ok(POOLER.map(present(res.pooler, "pooler")));
}
