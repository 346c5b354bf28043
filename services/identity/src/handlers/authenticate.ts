import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { unauthenticated } from "@dbaas/kit";
import { AuthenticateResponseSchema, PrincipalSchema, type AuthenticateRequest, type AuthenticateResponse } from "@dbaas/proto/identity";
import { effectivePermissions, roleToProto, SCOPES } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { classifyBearer, hashSecret } from "../credentials.ts";
import { findCredential } from "../db/credentials.ts";
import { planToProto } from "../mappers.ts";

export function authenticate(ctx: AppContext) {
  return async (req: AuthenticateRequest): Promise<AuthenticateResponse> => {
    const kind = classifyBearer(req.bearer);
    if (!kind) throw unauthenticated("invalid token");
    const row = await findCredential(ctx.pool, kind, hashSecret(req.bearer));
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
        planEnum: planToProto(row.plan),
        credentialKind: kind,
        credentialId: row.id,
        expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
        permissions: effectivePermissions(row.role, scopes),
      }),
    });
  };
}
