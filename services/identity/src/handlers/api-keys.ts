import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { newId, notFound, permissionDenied, Validator, withTransaction } from "@dbaas/kit";
import {
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
import { API_KEY_COLUMNS, apiKeyToProto, type ApiKeyRow } from "../mappers.ts";
import { checkName, checkRequired } from "../validation.ts";

/** Adds at most one violation for `scopes`; returns the canonical scope list the key gets. */
function checkScopes(v: Validator, requested: readonly string[], role: RoleName): Scope[] {
  const allowed = roleScopes(role);
  if (requested.length === 0) return [...allowed];
  const unknown = requested.filter((s) => !isScope(s));
  if (unknown.length > 0) {
    v.add("scopes", `unknown scope(s) ${unknown.join(", ")}; known scopes: ${SCOPES.join(", ")}`);
    return [];
  }
  const scopes = canonicalScopes(requested as Scope[]);
  const beyond = scopes.filter((s) => !allowed.includes(s));
  if (beyond.length > 0) v.add("scopes", `the ${role} role does not allow: ${beyond.join(", ")}`);
  return scopes;
}

export function createApiKey(ctx: AppContext) {
  return async (req: CreateApiKeyRequest): Promise<CreateApiKeyResponse> => {
    const ids = new Validator();
    checkRequired(ids, "organization_id", req.organizationId);
    checkRequired(ids, "user_id", req.userId);
    ids.throwIfAny();

    const member = await ctx.pool.query<{ role: RoleName }>(
      "SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2",
      [req.organizationId, req.userId],
    );
    const role = member.rows[0]?.role;
    // A key's authority derives from a current member; a key cannot mint further keys once its creator has left.
    if (!role) throw permissionDenied("only members of the organization can create API keys");

    const now = ctx.clock.now();
    const v = new Validator();
    const name = checkName(v, "name", req.name);
    const scopes = checkScopes(v, req.scopes, role);
    const expiresAt = req.expiresAt ? timestampDate(req.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= now.getTime()) v.add("expires_at", "must be in the future");
    v.throwIfAny();

    const secret = newApiKeySecret();
    const inserted = await ctx.pool.query<ApiKeyRow>(
      `INSERT INTO api_keys (id, organization_id, created_by, role, name, scopes, prefix, secret_hash, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       RETURNING ${API_KEY_COLUMNS}`,
      [
        newId("key"),
        req.organizationId,
        req.userId,
        role,
        name,
        scopes,
        secret.slice(0, API_KEY_DISPLAY_PREFIX_LENGTH),
        hashSecret(secret),
        now,
        expiresAt,
      ],
    );
    const key = inserted.rows[0]!;
    ctx.log.info("api key created", { organization_id: req.organizationId, key_id: key.id, user_id: req.userId });
    return create(CreateApiKeyResponseSchema, { apiKey: apiKeyToProto(key), secret });
  };
}

export function listApiKeys(ctx: AppContext) {
  return async (req: ListApiKeysRequest): Promise<ListApiKeysResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    v.throwIfAny();
    const result = await ctx.pool.query<ApiKeyRow>(
      `SELECT ${API_KEY_COLUMNS} FROM api_keys
       WHERE organization_id = $1 AND revoked_at IS NULL
       ORDER BY created_at, id`,
      [req.organizationId],
    );
    return create(ListApiKeysResponseSchema, { apiKeys: result.rows.map(apiKeyToProto) });
  };
}

export function revokeApiKey(ctx: AppContext) {
  return async (req: RevokeApiKeyRequest): Promise<RevokeApiKeyResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    checkRequired(v, "id", req.id);
    v.throwIfAny();
    const published = await withTransaction(ctx.pool, async (db) => {
      const result = await db.query(
        "UPDATE api_keys SET revoked_at = $3 WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL",
        [req.id, req.organizationId, ctx.clock.now()],
      );
      if (!result.rowCount) throw notFound("API key");
      return await ctx.revocations.publish(db, { credentialId: req.id });
    });
    await ctx.revocations.delivered([published]);
    ctx.log.info("api key revoked", { organization_id: req.organizationId, key_id: req.id });
    return create(RevokeApiKeyResponseSchema, {});
  };
}
