import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SCOPES } from "@dbaas/catalogue";
import { created, noContent, type Reply } from "../../middleware/envelope.ts";
import { Type } from "@sinclair/typebox";
import { body, oneOf, optional, PAGINATION_QUERY, timestamp, type Infer } from "../../schema.ts";
import { actorOf, pageOf } from "../mappers.ts";
import { API_KEY, CREATED_API_KEY } from "../responses-identity.ts";
import type { AuthedCall } from "../route.ts";
import { displayName } from "./auth.ts";

export const createBody = body({
  name: displayName("What the key is for."),
  scopes: optional(
    Type.Array(oneOf(SCOPES, "A scope."), {
      maxItems: SCOPES.length,
      description:
        "Scopes of the key, each one the calling credential holds (else 403) and the creator's role allows; default: every such scope.",
    }),
  ),
  expires_at: optional(timestamp("When the key stops working; default: never.")),
});

export const listQuery = PAGINATION_QUERY;

/**
 * Who is asking, for identity, which decides everything about keys: the
 * user, the credential's role and its effective permissions (a key restricted
 * to `databases:read` must not mint itself a broader one; `settings:write`
 * sees and revokes everyone's keys, anyone else only their own).
 */
const actor = ({ principal }: AuthedCall<unknown>) => actorOf(principal);

/** Any member; no scopes means every permission of the calling credential that the creator's role allows. */
export async function createApiKey(call: AuthedCall<Infer<typeof createBody>>): Promise<Reply> {
  const { principal, body } = call;
  const res = await call.ctx.identity.createApiKey({
    organizationId: principal.organizationId,
    actor: actor(call),
    name: body.name,
    scopes: body.scopes ?? [],
    expiresAt: body.expires_at === undefined ? undefined : timestampFromDate(new Date(body.expires_at)),
  });
  return created(CREATED_API_KEY.map(res));
}

/** The caller's own keys; every key of the organization for owner and admin. */
export async function listApiKeys(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.identity.listApiKeys({ organizationId: call.principal.organizationId, actor: actor(call) });
  return pageOf("api_keys", res.apiKeys, call.query, API_KEY.map);
}

/** One's own key; anyone's for owner and admin (another member's is 403 otherwise). */
export async function revokeApiKey(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.identity.revokeApiKey({ organizationId: call.principal.organizationId, id: call.params.id, actor: actor(call) });
  return noContent();
}
