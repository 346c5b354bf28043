import { create } from "@bufbuild/protobuf";
import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import { conflict, notConfirmedInTime, withTransaction } from "@dbaas/kit";
import { ResetPasswordResponseSchema, type ResetPasswordRequest, type ResetPasswordResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { connectionString, lockOwned, notifyAgent, type DatabaseRow } from "../records.ts";
import { generatePassword, scramVerifier } from "../scram.ts";

/**
 * Time kept back from the caller's own deadline, so that the caller hears this
 * handler's answer (and its message) rather than its transport's timeout.
 */
const ANSWER_MARGIN_MS = 500;

const NOT_CONFIRMED =
  "the new password was saved, but the database did not confirm the new password in time; it will be applied when its host is reachable — reset again to get a password you can use";

/**
 * A new password: its verifier is committed and handed to the agent, and the
 * call answers once the agent confirms it applied it. When it does not in time,
 * the answer is DEADLINE_EXCEEDED (the API's 504) saying what happened — never
 * UNAVAILABLE: the new verifier is committed, and a client resending the call
 * would rotate the password again.
 */
export function resetPassword(ctx: AppContext) {
  return async (req: ResetPasswordRequest, handlerCtx: HandlerContext): Promise<ResetPasswordResponse> => {
    const password = generatePassword();
    const verifier = scramVerifier(password);
    const row = await withTransaction(ctx.pool, async (db) => {
      const current = await lockOwned(db, req.organizationId, req.id);
      if (!["running", "stopped"].includes(current.status)) {
        throw conflict(`cannot reset the password of a database that is ${current.status}`);
      }
      const { rows } = await db.query<DatabaseRow>(
        `UPDATE databases SET scram_verifier = $2, credentials_generation = credentials_generation + 1, updated_at = now()
         WHERE id = $1 RETURNING *`,
        [req.id, verifier],
      );
      await notifyAgent(db, current.agent_id);
      return rows[0]!;
    });
    try {
      await waitForCredentials(ctx, row, handlerCtx);
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      // The verifier is committed: losing PostgreSQL now must not read as a call that did not run.
      ctx.log.error("could not wait for a new password to be confirmed", { database_id: row.id, error: err });
      throw notConfirmedInTime(NOT_CONFIRMED);
    }
    return create(ResetPasswordResponseSchema, {
      password,
      connectionString: connectionString(row, ctx.cfg.databaseDomain, password),
    });
  };
}

/**
 * Resolves when the owning agent reports the new credentials applied: from then
 * on the old password is refused. Woken by the agent's report notification,
 * with a slow poll as a safety net. Waits PASSWORD_APPLY_TIMEOUT_MS at most,
 * and never past the caller's deadline.
 */
async function waitForCredentials(ctx: AppContext, row: DatabaseRow, handlerCtx: HandlerContext): Promise<void> {
  const target = BigInt(row.credentials_generation);
  const callerLeft = handlerCtx.timeoutMs();
  const waitMs = Math.min(ctx.cfg.passwordApplyTimeoutMs, callerLeft === undefined ? Infinity : callerLeft - ANSWER_MARGIN_MS);
  const deadline = Date.now() + waitMs;
  let wake: () => void = () => {};
  let notified = false;
  const unsubscribe = ctx.feed.onDatabase(row.id, () => {
    notified = true;
    wake();
  });
  try {
    for (;;) {
      const { rows } = await ctx.pool.query<{ applied: string }>(
        "SELECT applied_credentials_generation AS applied FROM databases WHERE id = $1",
        [row.id],
      );
      if (BigInt(rows[0]!.applied) >= target) return;
      const left = deadline - Date.now();
      if (left <= 0 || handlerCtx.signal.aborted) break;
      await new Promise<void>((resolve) => {
        // A report that landed while we were querying: look again at once.
        if (notified) return resolve();
        const timer = setTimeout(resolve, Math.min(500, left));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      notified = false;
    }
  } finally {
    unsubscribe();
  }
  ctx.log.warn("the agent did not confirm a new password in time", { database_id: row.id, agent_id: row.agent_id });
  throw notConfirmedInTime(NOT_CONFIRMED);
}
