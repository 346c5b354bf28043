import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { newId, notFound, permissionDenied, Validator, withTransaction } from "@dbaas/kit";
import {
  type Actor,
  CreateApiKeyResponseSchema,
  ListApiKeysResponseSchema,
  RevokeApiKeyResponseSchema,
  type CreateApiKeyRequest,
  type CreateApiKeyResponse,
  type ListApiKeysRequest,
  type ListApiKeysResponse,
  type RevokeApiKeyRequest,
  type RevokeApiKeyResponse,
} from "@dbaas/proto/identity";
import { canonicalScopes, isScope, roleScopes, SCOPES, type RoleName, type Scope } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { API_KEY_DISPLAY_PREFIX_LENGTH, hashSecret, newApiKeySecret } from "../credentials.ts";
import { insertApiKey, listApiKeys as listApiKeyRows, lockApiKeyCreator, revokeApiKey as revokeApiKeyRow } from "../db/api-keys.ts";
import { roleIn } from "../db/memberships.ts";
import { apiKeyToProto } from "../mappers.ts";
import { checkActor, checkName, checkRequired, type ActorInfo } from "../validation.ts";

/**
 * Who may see and revoke every key of the organization rather than only their
 * own: owner and admin hold it (docs/product.md, Identity).
 */
const MANAGES_EVERY_KEY: Scope = "settings:write";

/**
 * The calling user and credential. The permissions are required: they are what
 * keeps a narrowly scoped key from minting a broader one, and what decides
 * whether the caller sees everyone's keys. Unknown names grant nothing.
 */
function checkKeyActor(v: Validator, actor: Actor | undefined): ActorInfo {
  const info = checkActor(v, actor);
  if (actor && actor.permissions.length === 0) v.add("actor", "permissions are required (the calling credential's effective permissions)");
  return info;
}

const managesEveryKey = (actor: ActorInfo) => actor.permissions.includes(MANAGES_EVERY_KEY);

/**
 * The scopes the new key gets, in canonical order. A key may have only what
 * the creator's role allows now (INVALID_ARGUMENT beyond it) and what the
 * calling credential may do (PERMISSION_DENIED beyond it: a key restricted to
 * `databases:read` must not mint itself a broader one). No scopes means
 * everything both allow.
 */
function checkScopes(v: Validator, requested: readonly string[], role: RoleName, credential: readonly Scope[]): Scope[] {
  const allowed = roleScopes(role);
  if (requested.length === 0) {
    const scopes = allowed.filter((s) => credential.includes(s));
    if (scopes.length === 0) throw permissionDenied(`the calling credential holds nothing the ${role} role allows`);
    return scopes;
  }
  const unknown = requested.filter((s) => !isScope(s));
  if (unknown.length > 0) {
    v.add("scopes", `unknown scope(s) ${unknown.join(", ")}; known scopes: ${SCOPES.join(", ")}`);
    return [];
  }
  const scopes = canonicalScopes(requested as Scope[]);
  const lacking = scopes.filter((s) => !credential.includes(s));
  if (lacking.length > 0) throw permissionDenied(`a key cannot have scopes its creator's credential lacks: ${lacking.join(", ")}`);
  const beyond = scopes.filter((s) => !allowed.includes(s));
  if (beyond.length > 0) v.add("scopes", `the ${role} role does not allow: ${beyond.join(", ")}`);
  return scopes;
}

/** Any member may create keys; the key's role is the creator's role now, its scopes capped as checkScopes says. */
export function createApiKey(ctx: AppContext) {
  return async (req: CreateApiKeyRequest): Promise<CreateApiKeyResponse> => {
    const ids = new Validator();
    checkRequired(ids, "organization_id", req.organizationId);
    const actor = checkKeyActor(ids, req.actor);
    // Superseded by the actor; a caller still setting it must mean the same user.
    if (req.userId !== "" && req.actor && req.userId !== req.actor.userId) ids.add("user_id", "must equal actor.user_id when set");
    ids.throwIfAny();

    const role = await roleIn(ctx.pool, req.organizationId, actor.userId);
    // A key's authority derives from a current member; a key cannot mint further keys once its creator has left.
    if (!role) throw permissionDenied("only members of the organization can create API keys");

    const now = ctx.clock.now();
    const v = new Validator();
    const name = checkName(v, "name", req.name);
    const scopes = checkScopes(v, req.scopes, role, actor.permissions);
    const expiresAt = req.expiresAt ? timestampDate(req.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= now.getTime()) v.add("expires_at", "must be in the future");
    v.throwIfAny();

    const secret = newApiKeySecret();
    const key = await insertApiKey(ctx.pool, {
      id: newId("key"),
      organizationId: req.organizationId,
      createdBy: actor.userId,
      role,
      name,
      scopes,
      prefix: secret.slice(0, API_KEY_DISPLAY_PREFIX_LENGTH),
      secretHash: hashSecret(secret),
      now,
      expiresAt,
    });
    ctx.log.info("api key created", { organization_id: req.organizationId, key_id: key.id, user_id: actor.userId });
    return create(CreateApiKeyResponseSchema, { apiKey: apiKeyToProto(key), secret });
  };
}

/** Every key of the organization for owner and admin; a member's own keys for anyone else. */
export function listApiKeys(ctx: AppContext) {
  return async (req: ListApiKeysRequest): Promise<ListApiKeysResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkKeyActor(v, req.actor);
    v.throwIfAny();
    const rows = await listApiKeyRows(ctx.pool, req.organizationId, managesEveryKey(actor), actor.userId);
    return create(ListApiKeysResponseSchema, { apiKeys: rows.map(apiKeyToProto) });
  };
}

/**
 * Revokes a key of the organization: one's own, or anyone's for owner and
 * admin. Another member's key is PERMISSION_DENIED, not NOT_FOUND: its id was
 * given to the caller by someone who can see it, and "not found" would mislead.
 */
export function revokeApiKey(ctx: AppContext) {
  return async (req: RevokeApiKeyRequest): Promise<RevokeApiKeyResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    checkRequired(v, "id", req.id);
    const actor = checkKeyActor(v, req.actor);
    v.throwIfAny();
    const published = await withTransaction(ctx.pool, async (db) => {
      const createdBy = await lockApiKeyCreator(db, req.organizationId, req.id);
      if (createdBy === undefined) throw notFound("API key");
      if (createdBy !== actor.userId && !managesEveryKey(actor)) {
        throw permissionDenied(`only its creator, an owner or an admin (${MANAGES_EVERY_KEY}) can revoke another member's API key`);
      }
      await revokeApiKeyRow(db, req.id, ctx.clock.now());
      return await ctx.revocations.publish(db, { credentialId: req.id });
    });
    await ctx.revocations.delivered([published]);
    ctx.log.info("api key revoked", { organization_id: req.organizationId, key_id: req.id, by: actor.userId });
    return create(RevokeApiKeyResponseSchema, {});
  };
}
