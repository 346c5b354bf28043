import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { notFound, permissionDenied, Validator } from "@dbaas/kit";
import { CreateTokenResponseSchema, type CreateTokenRequest, type CreateTokenResponse } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { issueSession } from "../sessions.ts";
import { checkRequired } from "../validation.ts";

/** After this many failed logins for one e-mail within the window, logins are refused. */
export const MAX_FAILED_LOGINS = 10;
export const FAILED_LOGIN_WINDOW_MS = 15 * 60 * 1000;

export function createToken(ctx: AppContext) {
  return async (req: CreateTokenRequest): Promise<CreateTokenResponse> => {
    const v = new Validator();
    checkRequired(v, "email", req.email.trim());
    checkRequired(v, "password", req.password);
    v.throwIfAny();

    const email = req.email.trim().toLowerCase();
    const now = ctx.clock.now();
    const windowStart = new Date(now.getTime() - FAILED_LOGIN_WINDOW_MS);

    // The attempt is recorded as a failure before the password is checked, in its
    // own statement, so concurrent guesses see each other and cannot all slip
    // under the limit; a successful login removes it again.
    const attempt = await ctx.pool.query<{ id: string }>(
      `WITH purge AS (DELETE FROM login_failures WHERE failed_at <= $3)
       INSERT INTO login_failures (email, failed_at) VALUES ($1, $2) RETURNING id`,
      [email, now, windowStart],
    );
    const attemptId = attempt.rows[0]!.id;
    const tenth = await ctx.pool.query<{ failed_at: Date }>(
      `SELECT failed_at FROM login_failures WHERE email = $1 AND failed_at > $2 AND id <> $3
       ORDER BY failed_at DESC OFFSET $4 LIMIT 1`,
      [email, windowStart, attemptId, MAX_FAILED_LOGINS - 1],
    );
    if (tenth.rowCount) {
      // A refused attempt is not counted, or a persistent attacker would lock the owner out for good.
      await ctx.pool.query("DELETE FROM login_failures WHERE id = $1", [attemptId]);
      const retryMs = tenth.rows[0]!.failed_at.getTime() + FAILED_LOGIN_WINDOW_MS - now.getTime();
      const seconds = Math.max(1, Math.ceil(retryMs / 1000));
      throw new ConnectError(`too many failed logins; try again in ${seconds} seconds`, Code.ResourceExhausted);
    }

    const found = await ctx.pool.query<{ id: string; password_hash: string }>(
      "SELECT id, password_hash FROM users WHERE lower(email) = $1",
      [email],
    );
    const user = found.rows[0];
    const verdict = user
      ? await ctx.passwords.verify(req.password, user.password_hash)
      : await ctx.passwords.verifyNobody(req.password);
    if (!user || !verdict.ok) throw new ConnectError("invalid e-mail or password", Code.Unauthenticated);

    await ctx.pool.query("DELETE FROM login_failures WHERE email = $1", [email]);
    if (verdict.needsRehash) {
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
