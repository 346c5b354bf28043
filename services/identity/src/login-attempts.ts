import { Code, ConnectError } from "@connectrpc/connect";
import type { AppContext } from "./context.ts";

/** After this many failed password checks for one e-mail within the window, checks are refused. */
export const MAX_FAILED_LOGINS = 10;
export const FAILED_LOGIN_WINDOW_MS = 15 * 60 * 1000;

/**
 * Runs a password check for `email` under the brute-force limit shared by
 * every place that takes a password (login, accepting an invitation with an
 * existing account, transferring ownership). Throws RESOURCE_EXHAUSTED while
 * the e-mail is locked out; otherwise returns what `check` found.
 *
 * The attempt is recorded as a failure before the password is checked, in its
 * own statement, so concurrent guesses see each other and cannot all slip
 * under the limit; a successful check removes the e-mail's failures.
 */
export async function limitedPasswordCheck(ctx: AppContext, rawEmail: string, check: () => Promise<boolean>): Promise<boolean> {
  const email = rawEmail.trim().toLowerCase();
  const now = ctx.clock.now();
  const windowStart = new Date(now.getTime() - FAILED_LOGIN_WINDOW_MS);
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
  const ok = await check();
  if (ok) await ctx.pool.query("DELETE FROM login_failures WHERE email = $1", [email]);
  return ok;
}
