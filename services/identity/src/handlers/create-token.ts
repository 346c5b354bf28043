import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { notFound, permissionDenied, Validator } from "@dbaas/kit";
import { CreateTokenResponseSchema, type CreateTokenRequest, type CreateTokenResponse } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { limitedPasswordCheck } from "../login-attempts.ts";
import { issueSession } from "../sessions.ts";
import { checkGivenPassword, checkLoginEmail } from "../validation.ts";

export function createToken(ctx: AppContext) {
  return async (req: CreateTokenRequest): Promise<CreateTokenResponse> => {
    const v = new Validator();
    const email = checkLoginEmail(v, "email", req.email).toLowerCase();
    checkGivenPassword(v, "password", req.password);
    v.throwIfAny();

    const now = ctx.clock.now();
    const found = await ctx.pool.query<{ id: string; password_hash: string }>(
      "SELECT id, password_hash FROM users WHERE lower(email) = $1",
      [email],
    );
    const user = found.rows[0];
    let needsRehash = false;
    const ok = await limitedPasswordCheck(ctx, email, async () => {
      const verdict = user
        ? await ctx.passwords.verify(req.password, user.password_hash)
        : await ctx.passwords.verifyNobody(req.password);
      needsRehash = verdict.needsRehash;
      return verdict.ok;
    });
    if (!user || !ok) throw new ConnectError("invalid e-mail or password", Code.Unauthenticated);

    if (needsRehash) {
      const fresh = await ctx.passwords.hash(req.password);
      await ctx.pool.query("UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1", [user.id, fresh, now]);
    }

    // Checked only after the password, so membership of an organization is not revealed to strangers.
    const membership = req.organizationId
      ? await ctx.pool.query<{ id: string }>(
          "SELECT id FROM memberships WHERE user_id = $1 AND organization_id = $2",
          [user.id, req.organizationId],
        )
      : await ctx.pool.query<{ id: string }>(
          "SELECT id FROM memberships WHERE user_id = $1 ORDER BY created_at, id LIMIT 1",
          [user.id],
        );
    const membershipId = membership.rows[0]?.id;
    if (!membershipId) {
      if (req.organizationId) throw notFound("organization");
      throw permissionDenied("this account is not a member of any organization");
    }
    const token = await issueSession(ctx.pool, membershipId, now, ctx.tokenTtlSeconds);
    return create(CreateTokenResponseSchema, { token });
  };
}
