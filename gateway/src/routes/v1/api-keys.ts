import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SCOPES } from "@dbaas/kit";
import type { ApiKey } from "@dbaas/proto/identity";
import { ApiError } from "../../errors.ts";
import { created, noContent, type Reply } from "../../middleware/envelope.ts";
import { Type } from "@sinclair/typebox";
import { body, oneOf, optional, PAGINATION_QUERY, timestamp, type Infer } from "../../schema.ts";
import { iso, pageOf, present, roleName } from "../mappers.ts";
import type { AuthedCall } from "../route.ts";
import { displayName } from "./auth.ts";

export const createBody = body({
  name: displayName("What the key is for."),
  scopes: optional(
    Type.Array(oneOf(SCOPES, "A scope."), {
      maxItems: SCOPES.length,
      description: "Scopes of the key; default: every permission of the calling credential.",
    }),
  ),
  expires_at: optional(timestamp("When the key stops working; default: never.")),
});

export const listQuery = PAGINATION_QUERY;

function apiKey(key: ApiKey) {
  return {
    id: key.id,
    name: key.name,
    scopes: key.scopes,
    prefix: key.prefix,
    role: roleName(key.role),
    created_by: key.createdBy,
    created_at: iso(key.createdAt),
    expires_at: iso(key.expiresAt),
  };
}

/**
 * Identity bounds a new key by its creator's role, but only the gateway knows
 * which credential is asking: a key restricted to `databases:read` must not
 * mint itself a broader one. So the requested scopes must be among the
 * caller's effective permissions, and no scopes means exactly those.
 */
export async function createApiKey(call: AuthedCall<Infer<typeof createBody>>): Promise<Reply> {
  const { principal, body } = call;
  const scopes = body.scopes ?? principal.permissions;
  const beyond = scopes.filter((s) => !principal.permissions.includes(s));
  if (beyond.length > 0) {
    throw new ApiError(
      403,
      "insufficient_permissions",
      `a key cannot have scopes its creator's credential lacks: ${beyond.join(", ")}`,
    );
  }
  const res = await call.ctx.identity.createApiKey({
    organizationId: principal.organizationId,
    userId: principal.userId,
    name: body.name,
    scopes,
    expiresAt: body.expires_at === undefined ? undefined : timestampFromDate(new Date(body.expires_at)),
  });
  return created({ ...apiKey(present(res.apiKey, "api_key")), secret: res.secret });
}

export async function listApiKeys(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.identity.listApiKeys({ organizationId: call.principal.organizationId });
  return pageOf("api_keys", res.apiKeys, call.query, apiKey);
}

export async function revokeApiKey(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.identity.revokeApiKey({ organizationId: call.principal.organizationId, id: call.params.id });
  return noContent();
}
