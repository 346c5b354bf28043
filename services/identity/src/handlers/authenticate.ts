import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { unauthenticated } from "@dbaas/kit";
import {
  AuthenticateResponseSchema,
  PrincipalSchema,
  type AuthenticateRequest,
  type AuthenticateResponse,
} from "@dbaas/proto/identity";
import { effectivePermissions, roleToProto, SCOPES, type RoleName } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { classifyBearer, hashSecret } from "../credentials.ts";

interface CredentialRow {
  id: string;
  user_id: string;
  organization_id: string;
  role: RoleName;
  plan: string;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
}

// The session's role comes from the membership row as it is now: a demotion or
// removal takes effect on the very next call.
const SESSION_QUERY = `
  SELECT s.id, m.user_id, m.organization_id, m.role, o.plan, NULL::text[] AS scopes, s.expires_at, NULL::timestamptz AS revoked_at
  FROM sessions s
  JOIN memberships m ON m.id = s.membership_id
  JOIN organizations o ON o.id = m.organization_id
  WHERE s.token_hash = $1`;

// A key carries the role its creator had when creating it, and does not depend on their membership.
const API_KEY_QUERY = `
  SELECT k.id, k.created_by AS user_id, k.organization_id, k.role, o.plan, k.scopes, k.expires_at, k.revoked_at
  FROM api_keys k
  JOIN organizations o ON o.id = k.organization_id
  WHERE k.secret_hash = $1`;

export function authenticate(ctx: AppContext) {
  return async (req: AuthenticateRequest): Promise<AuthenticateResponse> => {
    const kind = classifyBearer(req.bearer);
    if (!kind) throw unauthenticated("invalid token");
    const result = await ctx.pool.query<CredentialRow>(kind === "session" ? SESSION_QUERY : API_KEY_QUERY, [
      hashSecret(req.bearer),
    ]);
    const row = result.rows[0];
    if (!row) throw unauthenticated("invalid token");
    if (row.revoked_at) throw unauthenticated("API key revoked");
    if (row.expires_at && row.expires_at.getTime() <= ctx.clock.now().getTime()) {
      throw unauthenticated(kind === "session" ? "token expired" : "API key expired");
    }

    const scopes = row.scopes ?? [...SCOPES];
    return create(AuthenticateResponseSchema, {
      principal: create(PrincipalSchema, {
        userId: row.user_id,
        organizationId: row.organization_id,
        role: roleToProto(row.role),
        scopes,
        plan: row.plan,
        credentialKind: kind,
        credentialId: row.id,
        expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
        permissions: effectivePermissions(row.role, scopes),
      }),
    });
  };
}
