import { setTimeout as sleep } from "node:timers/promises";
import { checkAlerts } from "./alerts/check.ts";
import { relayAlertNotifications } from "./alerts/relay.ts";
import type { AppContext } from "./context.ts";
import { chargeDueInvoices } from "./invoices/charge.ts";
import { closeEndedPeriods } from "./invoices/close.ts";
import { purgeUsageSamples } from "./metering/retention.ts";
import { detachRemovedPaymentMethods } from "./payment-methods/detach.ts";

/** Runs `run` at once, then every `intervalMs` after it finished, until `signal` aborts. */
async function repeat(signal: AbortSignal, intervalMs: number, run: () => Promise<void>): Promise<void> {
  while (!signal.aborted) {
    await run();
    await sleep(intervalMs, undefined, { signal }).catch(() => {});
  }
}

/**
 * The invoicing loop until `signal` aborts: at once, then every `intervalMs`,
 * closes the months that have ended by the context's clock, then charges what
 * is due (new invoices, lost answers, past-due ones once a day), then detaches
 * at the processor the removed payment methods it still holds (a detach that
 * failed when the method was removed), then purges usage samples past
 * USAGE_SAMPLE_RETENTION_DAYS by the context's clock. A failed run
 * is logged and the next one picks up where it stopped; an abort lets the
 * invoice at hand finish, so the returned promise settles with no charge half
 * stored.
 */
export function startInvoicing(ctx: AppContext, signal: AbortSignal, intervalMs: number): Promise<void> {
  return repeat(signal, intervalMs, async () => {
    try {
      const issued = await closeEndedPeriods(ctx, signal);
      if (issued > 0) ctx.log.info("months closed", { invoices_issued: issued });
      await chargeDueInvoices(ctx, signal);
    } catch (err) {
      ctx.log.warn("invoicing run failed; will retry", { error: err });
    }
    try {
      await detachRemovedPaymentMethods(ctx, { signal });
    } catch (err) {
      ctx.log.warn("detaching removed payment methods failed; will retry", { error: err });
    }
    try {
      const purged = await purgeUsageSamples(ctx);
      if (purged > 0) ctx.log.info("usage samples past retention deleted", { count: purged });
    } catch (err) {
      ctx.log.warn("usage samples purge failed; will retry", { error: err });
    }
  });
}

/**
 * The alert loop until `signal` aborts, apart from invoicing so that neither
 * an identity outage nor a slow month close holds up the other: at once, then
 * every `intervalMs`, fires the alerts that month-to-date totals reach, then
 * relays the notices that are due (the new ones at once, failed ones after
 * their backoff). Without an identity client nothing could be delivered, so
 * alerts are not checked at all (a firing is only worth recording if someone
 * can be told); that is logged once.
 */
export function startAlerting(ctx: AppContext, signal: AbortSignal, intervalMs: number): Promise<void> {
  const { identity } = ctx;
  if (!identity) {
    ctx.log.warn("IDENTITY_URL is not set: billing alerts are stored but neither checked nor delivered");
    return Promise.resolve();
  }
  return repeat(signal, intervalMs, async () => {
    try {
      const fired = await checkAlerts(ctx, signal);
      if (fired > 0) ctx.log.info("alerts fired", { count: fired });
    } catch (err) {
      ctx.log.warn("alert check failed; will retry", { error: err });
    }
    try {
      await relayAlertNotifications(ctx, identity, signal);
    } catch (err) {
      ctx.log.warn("relaying alert notices failed; will retry", { error: err });
    }
  });
}
