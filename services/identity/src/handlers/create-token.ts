import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { notFound, permissionDenied, Validator } from "@dbaas/kit";
import { CreateTokenResponseSchema, type CreateTokenRequest, type CreateTokenResponse } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { findMembershipId } from "../db/memberships.ts";
import { findAccount, setPasswordHash } from "../db/users.ts";
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
    const user = await findAccount(ctx.pool, email);
    let needsRehash = false;
    const ok = await limitedPasswordCheck(ctx, email, async () => {
      const verdict = user ? await ctx.passwords.verify(req.password, user.password_hash) : await ctx.passwords.verifyNobody(req.password);
      needsRehash = verdict.needsRehash;
      return verdict.ok;
    });
    if (!user || !ok) throw new ConnectError("invalid e-mail or password", Code.Unauthenticated);
    if (needsRehash) await setPasswordHash(ctx.pool, user.id, await ctx.passwords.hash(req.password), now);

    // Checked only after the password, so membership of an organization is not revealed to strangers.
    const membershipId = await findMembershipId(ctx.pool, user.id, req.organizationId);
    if (!membershipId) {
      if (req.organizationId) throw notFound("organization");
      throw permissionDenied("this account is not a member of any organization");
    }
    const token = await issueSession(ctx.pool, membershipId, now, ctx.tokenTtlSeconds);
    return create(CreateTokenResponseSchema, { token });
  };
}
