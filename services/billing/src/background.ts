import { setTimeout as sleep } from "node:timers/promises";
import type { AppContext } from "./context.ts";
import { chargeDueInvoices } from "./invoices/charge.ts";
import { closeEndedPeriods } from "./invoices/close.ts";

/**
 * The invoicing loop until `signal` aborts: at once, then every `intervalMs`,
 * closes the months that have ended by the context's clock, then charges what
 * is due (new invoices, lost answers, past-due ones once a day). A failed run
 * is logged and the next one picks up where it stopped; an abort lets the
 * invoice at hand finish, so the returned promise settles with no charge half
 * stored.
 */
export function startInvoicing(ctx: AppContext, signal: AbortSignal, intervalMs: number): Promise<void> {
  const pause = () => sleep(intervalMs, undefined, { signal }).catch(() => {});
  return (async () => {
    while (!signal.aborted) {
      try {
        const issued = await closeEndedPeriods(ctx, signal);
        if (issued > 0) ctx.log.info("months closed", { invoices_issued: issued });
        await chargeDueInvoices(ctx, signal);
      } catch (err) {
        ctx.log.warn("invoicing run failed; will retry", { error: err });
      }
      await pause();
    }
  })();
}
