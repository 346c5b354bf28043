import type { HandlerContext } from "@connectrpc/connect";
import { notConfirmedInTime } from "@dbaas/kit";
import type { AppContext } from "./context.ts";
import { appliedCredentials, type DatabaseRow } from "./db/databases.ts";

/**
 * Time kept back from the caller's own deadline, so that the caller hears this
 * handler's answer (and its message) rather than its transport's timeout.
 */
const ANSWER_MARGIN_MS = 500;

/** How often the wait looks again without a notification: the safety net for a lost one. */
const POLL_MS = 500;

export const NOT_CONFIRMED =
  "the new password was saved, but the database did not confirm the new password in time; it will be applied when its host is reachable — reset again to get a password you can use";

/**
 * Resolves when the owning agent reports the credentials of `row` applied:
 * from then on the old password is refused. Woken by the agent's report
 * notification, with a slow poll as a safety net. Waits
 * PASSWORD_APPLY_TIMEOUT_MS at most by the context's clock, and never past the
 * caller's deadline; then DEADLINE_EXCEEDED (NOT_CONFIRMED).
 */
export async function waitForCredentials(ctx: AppContext, row: DatabaseRow, handlerCtx: HandlerContext): Promise<void> {
  const target = BigInt(row.credentials_generation);
  const callerLeft = handlerCtx.timeoutMs();
  const waitMs = Math.min(ctx.cfg.passwordApplyTimeoutMs, callerLeft === undefined ? Infinity : callerLeft - ANSWER_MARGIN_MS);
  const deadline = ctx.clock.now().getTime() + waitMs;
  let wake: () => void = () => {};
  let notified = false;
  const unsubscribe = ctx.feed.onDatabase(row.id, () => {
    notified = true;
    wake();
  });
  try {
    for (;;) {
      if ((await appliedCredentials(ctx.pool, row.id)) >= target) return;
      const left = deadline - ctx.clock.now().getTime();
      if (left <= 0 || handlerCtx.signal.aborted) break;
      await new Promise<void>((resolve) => {
        // A report that landed while we were querying: look again at once.
        if (notified) return resolve();
        const timer = setTimeout(resolve, Math.min(POLL_MS, left));
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
