import type pg from "pg";
import { newId, withTransaction } from "@dbaas/kit";
import { CURRENCY, TRANSFER_FREE_GB_PER_MONTH } from "@dbaas/catalogue";
import type { AppContext } from "../context.ts";
import { claimScheduledOrganization, insertInvoice, setNextPeriod, type InvoiceLineRecord } from "../db/invoices.ts";
import { listStatusChangesForPeriod } from "../db/status-events.ts";
import { readMeteredMonths } from "../db/usage-samples.ts";
import { monthKey, monthOf, periodName } from "../months.ts";
import {
  NO_SAMPLES,
  priceCompute,
  priceComputeByTier,
  priceStorage,
  priceTransfer,
  usageOf,
  type PricedLine,
  type Usage,
} from "../usage.ts";

const cents = (amount: number) => Math.round(amount * 100);

/**
 * An invoice's lines for a month's usage (`monthStart` its first instant): one
 * per compute tier that ran, then storage in GB-months, the data transfer
 * beyond the free allowance in GB and the read replicas' hours (one line, each
 * interval at its replica's tier), when they come to anything. Each is priced
 * straight to cents (rounded once, half up, per line).
 */
export function invoiceLines(usage: Usage, monthStart: Date): InvoiceLineRecord[] {
  const lines: InvoiceLineRecord[] = priceComputeByTier(usage.running, 2).map((c) => ({
    description: `Compute, ${c.tier}`,
    quantity: c.quantity,
    unit: "hour",
    amountCents: cents(c.amount),
  }));
  const storage = priceStorage(usage.metered.storageByteMs, monthStart, 2);
  const transfer = priceTransfer(usage.metered.egressBytes, 2);
  const others: [string, string, PricedLine][] = [
    ["Storage", "GB-month", storage],
    [`Data transfer beyond ${TRANSFER_FREE_GB_PER_MONTH} GB free`, "GB", { quantity: transfer.billableGb, amount: transfer.amount }],
    ["Replicas", "hour", priceCompute(usage.replicas, 2)],
  ];
  for (const [description, unit, line] of others) {
    if (line.quantity > 0) lines.push({ description, quantity: line.quantity, unit, amountCents: cents(line.amount) });
  }
  return lines;
}

/**
 * Closes the organization's months from `from` up to `until` (exclusive),
 * issuing an invoice for each that comes to at least a cent. Status changes
 * and metered months are read once for the whole stretch. Returns the invoices issued.
 */
async function closeMonths(ctx: AppContext, db: pg.PoolClient, organizationId: string, from: Date, until: Date): Promise<number> {
  const changes = await listStatusChangesForPeriod(db, organizationId, from, until);
  const metered = await readMeteredMonths(db, organizationId, from, until);
  const issuedAt = ctx.clock.now();
  let issued = 0;
  for (let start = from; start < until; start = monthOf(start).end) {
    const lines = invoiceLines(usageOf(changes, start, monthOf(start).end, metered.get(monthKey(start)) ?? NO_SAMPLES), start);
    const amountCents = lines.reduce((sum, l) => sum + l.amountCents, 0);
    if (amountCents === 0) continue;
    const id = newId("inv");
    const result = await insertInvoice(db, { id, organizationId, period: start, currency: CURRENCY, issuedAt, lines });
    if (result.inserted) {
      issued++;
      ctx.log.info("invoice issued", {
        organization_id: organizationId,
        invoice_id: id,
        period: periodName(start),
        amount_cents: amountCents,
      });
    } else if (result.existingAmountCents !== amountCents) {
      // Status changes delivered after the month was invoiced: the invoice stands, someone has to credit or bill the difference.
      ctx.log.warn("usage changed after the month was invoiced", {
        organization_id: organizationId,
        period: periodName(start),
        invoiced_cents: result.existingAmountCents,
        usage_cents: amountCents,
      });
    }
  }
  return issued;
}

/**
 * Closes every calendar month (UTC) that has ended by the clock, for every
 * organization with months still to close: one transaction per organization,
 * holding its schedule row, so concurrent closers (replicas) share the work
 * and the unique (organization, period) keeps a month from being billed twice.
 * An organization whose months cannot be closed is logged and left for the
 * next run rather than holding up the others. Returns the invoices issued.
 */
export async function closeEndedPeriods(ctx: AppContext, signal?: AbortSignal): Promise<number> {
  const until = monthOf(ctx.clock.now()).start;
  const failed: string[] = [];
  let issued = 0;
  while (!signal?.aborted) {
    let organizationId: string | undefined;
    try {
      const closed = await withTransaction(ctx.pool, async (db) => {
        const due = await claimScheduledOrganization(db, until, failed);
        if (!due) return undefined;
        organizationId = due.organizationId;
        const n = await closeMonths(ctx, db, due.organizationId, due.nextPeriod, until);
        await setNextPeriod(db, due.organizationId, until);
        return n;
      });
      if (closed === undefined) break;
      issued += closed;
    } catch (err) {
      if (organizationId === undefined) throw err;
      failed.push(organizationId);
      ctx.log.error("closing an organization's months failed; retried next run", { organization_id: organizationId, error: err });
    }
  }
  return issued;
}
