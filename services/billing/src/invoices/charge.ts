import { withTransaction } from "@dbaas/kit";
import type { AppContext } from "../context.ts";
import {
  dueInvoiceIds,
  findChargeTarget,
  finishAttempt,
  insertAttempt,
  lockInvoice,
  markPaid,
  markPastDue,
  markResent,
  pastDueInvoiceIds,
  pendingAttempt,
  setNextCharge,
  type ChargeAttempt,
} from "../db/charges.ts";
import { ProcessorError, type ChargeResult } from "../processor/processor.ts";

/**
 * How long a charge sent without a stored answer counts as in flight. Past it,
 * the process that sent it is presumed dead, and the charge is sent again with
 * its key. Far above the processor's request timeout, so a live request is
 * never sent twice at once.
 */
const CHARGE_LEASE_MS = 10 * 60_000;
/**
 * An invoice whose charge did not go through (declined, no payment method, or
 * a request the processor refused) is charged again by the loop after this:
 * once a day, not at every run, so a card is not hammered with declines and a
 * refusal does not pile up attempts. A new default is charged at once anyway.
 */
const RETRY_AFTER_MS = 24 * 3_600_000;

/**
 * What a charge came to: `unknown` when the processor could not be asked (the
 * attempt stays pending and is sent again, same key, after the lease);
 * `failed` when it refused our request (nothing charged, a new attempt a day
 * later); `skipped` when there was nothing to do (paid, not due, or a
 * charge in flight elsewhere).
 */
type ChargeOutcome = "paid" | "declined" | "no_payment_method" | "unknown" | "failed" | "skipped";

/**
 * `due`: the loop's charge, when next_charge_at has come. `past_due`: an
 * organization has a new default payment method, so its past-due invoices are
 * charged now.
 */
type ChargeTrigger = "due" | "past_due";

type Plan =
  | { kind: "skip" }
  | { kind: "no_payment_method"; organizationId: string }
  | { kind: "send"; organizationId: string; attempt: ChargeAttempt; resent: boolean };

const later = (at: Date, ms: number) => new Date(at.getTime() + ms);

/**
 * Decides, under the invoice's lock, what to send, and commits it before
 * anything is sent: a pending attempt whose answer was lost goes out again
 * with its key and parameters; otherwise a new attempt on the default payment
 * method. `avoid` is a payment method just declined, not to be charged again.
 */
async function plan(ctx: AppContext, invoiceId: string, trigger: ChargeTrigger, avoid?: string): Promise<Plan> {
  return await withTransaction(ctx.pool, async (db): Promise<Plan> => {
    const now = ctx.clock.now();
    const invoice = await lockInvoice(db, invoiceId);
    if (!invoice || invoice.status === "paid") return { kind: "skip" };
    const due = trigger === "due" ? invoice.nextChargeAt !== null && invoice.nextChargeAt <= now : invoice.status === "past_due";
    if (!due) return { kind: "skip" };

    const pending = await pendingAttempt(db, invoiceId);
    if (pending && pending.sentAt.getTime() + CHARGE_LEASE_MS > now.getTime()) return { kind: "skip" };
    let sending: Plan;
    if (pending) {
      await markResent(db, invoiceId, pending.attempt, now);
      sending = { kind: "send", organizationId: invoice.organizationId, attempt: pending, resent: true };
    } else {
      const target = await findChargeTarget(db, invoice.organizationId, ctx.processor.name);
      if (!target) {
        await markPastDue(db, invoiceId, later(now, RETRY_AFTER_MS));
        return { kind: "no_payment_method", organizationId: invoice.organizationId };
      }
      if (target.paymentMethodId === avoid) return { kind: "skip" };
      const attempt = await insertAttempt(
        db,
        { invoiceId, ...target, amountCents: invoice.amountCents, currency: invoice.currency, sentAt: now },
        ctx.processor.name,
      );
      sending = { kind: "send", organizationId: invoice.organizationId, attempt, resent: false };
    }
    // The lease: no other charger sends this invoice until the answer is stored or the lease runs out.
    await setNextCharge(db, invoiceId, later(now, CHARGE_LEASE_MS));
    return sending;
  });
}

/** Sends the attempt (outside any transaction) and stores the answer. */
async function send(ctx: AppContext, organizationId: string, attempt: ChargeAttempt): Promise<ChargeOutcome> {
  const fields = {
    organization_id: organizationId,
    invoice_id: attempt.invoiceId,
    attempt: attempt.attempt,
    amount_cents: attempt.amountCents,
  };
  let result: ChargeResult;
  try {
    result = await ctx.processor.charge({
      customerRef: attempt.customerRef,
      paymentMethodRef: attempt.paymentMethodRef,
      amountCents: attempt.amountCents,
      currency: attempt.currency,
      idempotencyKey: attempt.idempotencyKey,
      invoiceId: attempt.invoiceId,
    });
  } catch (err) {
    if (!(err instanceof ProcessorError)) throw err;
    ctx.log.error("invoice charge failed at the payment processor", { ...fields, retryable: err.retryable, error: err });
    if (err.retryable) return "unknown";
    await withTransaction(ctx.pool, async (db) => {
      const now = ctx.clock.now();
      if (await finishAttempt(db, attempt.invoiceId, attempt.attempt, { status: "failed", failure: err.message }, now)) {
        await setNextCharge(db, attempt.invoiceId, later(now, RETRY_AFTER_MS));
      }
    });
    return "failed";
  }
  await withTransaction(ctx.pool, async (db) => {
    const now = ctx.clock.now();
    const outcome = result.paid
      ? ({ status: "succeeded", chargeRef: result.ref } as const)
      : ({ status: "declined", failure: result.reason } as const);
    if (!(await finishAttempt(db, attempt.invoiceId, attempt.attempt, outcome, now))) return;
    if (result.paid) await markPaid(db, attempt.invoiceId, now);
    else await markPastDue(db, attempt.invoiceId, later(now, RETRY_AFTER_MS));
  });
  if (result.paid) ctx.log.info("invoice paid", fields);
  else ctx.log.warn("invoice charge declined; invoice past due", { ...fields, reason: result.reason });
  return result.paid ? "paid" : "declined";
}

/**
 * Charges one invoice to its organization's default payment method. A charge
 * whose answer was lost is settled first, with its key; if that one is
 * declined and the default has changed since, the new default is charged too.
 */
async function chargeInvoice(ctx: AppContext, invoiceId: string, trigger: ChargeTrigger): Promise<ChargeOutcome> {
  const first = await plan(ctx, invoiceId, trigger);
  if (first.kind === "skip") return "skipped";
  if (first.kind === "no_payment_method") {
    ctx.log.warn("invoice past due: no default payment method", { organization_id: first.organizationId, invoice_id: invoiceId });
    return "no_payment_method";
  }
  const outcome = await send(ctx, first.organizationId, first.attempt);
  if (outcome !== "declined" || !first.resent) return outcome;
  const second = await plan(ctx, invoiceId, "past_due", first.attempt.paymentMethodId);
  return second.kind === "send" ? await send(ctx, second.organizationId, second.attempt) : outcome;
}

/**
 * The loop's charges: every invoice whose next_charge_at has come (new ones,
 * past-due ones once a day, lost answers after the lease), until none is left
 * or `signal` aborts. One invoice's failure is logged and does not stop the rest.
 */
export async function chargeDueInvoices(ctx: AppContext, signal?: AbortSignal): Promise<void> {
  const tried: string[] = [];
  while (!signal?.aborted) {
    const ids = await dueInvoiceIds(ctx.pool, ctx.clock.now(), tried, 100);
    if (ids.length === 0) return;
    for (const id of ids) {
      if (signal?.aborted) return;
      tried.push(id);
      try {
        await chargeInvoice(ctx, id, "due");
      } catch (err) {
        ctx.log.error("charging an invoice failed; retried later", { invoice_id: id, error: err });
      }
    }
  }
}

/**
 * Charges the organization's past-due invoices to its (new) default payment
 * method. Called after the request that set the default has committed; a
 * failure is logged, never the caller's error: the loop retries anyway.
 */
export async function chargePastDueInvoices(ctx: AppContext, organizationId: string): Promise<void> {
  try {
    for (const id of await pastDueInvoiceIds(ctx.pool, organizationId)) {
      try {
        await chargeInvoice(ctx, id, "past_due");
      } catch (err) {
        ctx.log.error("charging a past-due invoice failed; retried later", { organization_id: organizationId, invoice_id: id, error: err });
      }
    }
  } catch (err) {
    ctx.log.error("listing past-due invoices failed", { organization_id: organizationId, error: err });
  }
}
