import { Code, ConnectError } from "@connectrpc/connect";
import type { Clock } from "@dbaas/kit";
import { clearFailures, deleteFailure, nthRecentFailure, recordFailure } from "./db/login-failures.ts";
import type { Queryable } from "./db/queryable.ts";

/** After this many failed password checks for one e-mail within the window, checks are refused. */
export const MAX_FAILED_LOGINS = 10;
export const FAILED_LOGIN_WINDOW_MS = 15 * 60 * 1000;

/**
 * Runs a password check for `email` under the brute-force limit shared by
 * every place that takes a password (login, accepting an invitation with an
 * existing account, transferring ownership). Throws RESOURCE_EXHAUSTED while
 * the e-mail is locked out; otherwise returns what `check` found. The window
 * is measured on `clock`.
 *
 * The attempt is recorded as a failure before the password is checked, in its
 * own statement, so concurrent guesses see each other and cannot all slip
 * under the limit; a successful check removes the e-mail's failures.
 */
export async function limitedPasswordCheck(
  ctx: { pool: Queryable; clock: Clock },
  rawEmail: string,
  check: () => Promise<boolean>,
): Promise<boolean> {
  const email = rawEmail.trim().toLowerCase();
  const now = ctx.clock.now();
  const windowStart = new Date(now.getTime() - FAILED_LOGIN_WINDOW_MS);
  const attemptId = await recordFailure(ctx.pool, email, now, windowStart);
  const tenth = await nthRecentFailure(ctx.pool, email, windowStart, attemptId, MAX_FAILED_LOGINS);
  if (tenth) {
    // A refused attempt is not counted, or a persistent attacker would lock the owner out for good.
    await deleteFailure(ctx.pool, attemptId);
    const retryMs = tenth.getTime() + FAILED_LOGIN_WINDOW_MS - now.getTime();
    const seconds = Math.max(1, Math.ceil(retryMs / 1000));
    throw new ConnectError(`too many failed logins; try again in ${seconds} seconds`, Code.ResourceExhausted);
  }
  const ok = await check();
  if (ok) await clearFailures(ctx.pool, email);
  return ok;
}
