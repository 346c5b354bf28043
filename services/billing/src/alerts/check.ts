import { withTransaction } from "@dbaas/kit";
import { CURRENCY } from "@dbaas/catalogue";
import type { AppContext } from "../context.ts";
import { fireAlerts, insertNotification, lockAlerts, organizationsWithUnfiredAlerts, type FiredAlert } from "../db/alerts.ts";
import { monthOf, periodName } from "../months.ts";
import { readMonthToDate } from "../usage.ts";

/** Organizations read per query while checking; each is then checked in its own transaction. */
const BATCH = 100;

/** An amount with 2 to 4 decimals: cents as people write them, the meter's 4 decimals where it has them. */
function money(amount: number): string {
  return amount.toFixed(4).replace(/0{1,2}$/, "");
}

/**
 * Identity de-duplicates by this id, so a notice sent again (lost answer,
 * crash before it was marked delivered) is mailed once. One per alert and month.
 */
const notificationId = (alertId: string, period: string) => `alert-${alertId}-${period}`;

/**
 * The mail for a firing. Billing knows the organization only by id and does
 * not ask identity for more, so the text names no organization.
 */
function notice(alert: FiredAlert, period: string, total: number, now: Date): { subject: string; body: string } {
  const asOf = `${now.toISOString().slice(0, 16).replace("T", " ")} UTC`;
  return {
    subject: `Spending alert: your organization passed ${money(alert.threshold)} ${alert.currency} in ${period}`,
    body: [
      `Your organization's spending in ${period} has reached ${money(total)} ${CURRENCY}, passing the threshold of ${money(alert.threshold)} ${alert.currency} set by billing alert ${alert.id}.`,
      "",
      `Month-to-date total: ${money(total)} ${CURRENCY} (as of ${asOf})`,
      `Alert threshold: ${money(alert.threshold)} ${alert.currency}`,
      "",
      "This alert will not fire again before next month. The month-to-date usage, line by line, is at GET /v1/billing/usage.",
    ].join("\n"),
  };
}

/**
 * Fires the organization's alerts that its month-to-date total reaches and
 * that have not fired this month: each firing and its notice are committed
 * together, and the (alert, month) key keeps a second evaluator from firing
 * the same alert again. Returns how many fired.
 */
async function checkOrganization(ctx: AppContext, organizationId: string, now: Date): Promise<number> {
  const usage = await readMonthToDate(ctx.pool, organizationId, now);
  if (usage.total === 0) return 0;
  const period = periodName(usage.period.start);
  const fired = await withTransaction(ctx.pool, async (db) => {
    await lockAlerts(db, organizationId);
    const alerts = await fireAlerts(db, organizationId, usage.period.start, usage.total, now);
    for (const alert of alerts) {
      const { subject, body } = notice(alert, period, usage.total, now);
      await insertNotification(
        db,
        { notificationId: notificationId(alert.id, period), alertId: alert.id, period: usage.period.start, organizationId, subject, body },
        now,
      );
    }
    return alerts;
  });
  for (const alert of fired) {
    ctx.log.info("alert fired", {
      organization_id: organizationId,
      alert_id: alert.id,
      period,
      threshold: alert.threshold,
      total: usage.total,
    });
  }
  return fired.length;
}

/**
 * Checks every organization with an alert that has not fired in the current
 * calendar month (UTC) against its month-to-date total, the figure GetUsage
 * reports. Totals only grow within a month, so an alert fires at most once a
 * month, at the first check at or above its threshold. One organization's
 * failure is logged and left for the next run. Returns how many alerts fired.
 */
export async function checkAlerts(ctx: AppContext, signal?: AbortSignal): Promise<number> {
  const now = ctx.clock.now();
  const period = monthOf(now).start;
  let fired = 0;
  let after = "";
  while (!signal?.aborted) {
    const organizations = await organizationsWithUnfiredAlerts(ctx.pool, period, after, BATCH);
    if (organizations.length === 0) break;
    for (const organizationId of organizations) {
      if (signal?.aborted) break;
      after = organizationId;
      try {
        fired += await checkOrganization(ctx, organizationId, now);
      } catch (err) {
        ctx.log.error("checking an organization's alerts failed; retried next run", { organization_id: organizationId, error: err });
      }
    }
  }
  return fired;
}
