import type pg from "pg";
import type { InvoiceStatus } from "./invoices.ts";

/** What a charge of the invoice needs, read under the invoice's row lock. */
export interface ChargeableInvoice {
  id: string;
  organizationId: string;
  status: InvoiceStatus;
  amountCents: number;
  currency: string;
  nextChargeAt: Date | null;
}

export interface ChargeAttempt {
  invoiceId: string;
  attempt: number;
  idempotencyKey: string;
  customerRef: string;
  paymentMethodId: string;
  paymentMethodRef: string;
  amountCents: number;
  currency: string;
  sentAt: Date;
}

/** Locks the invoice for the transaction: one charger at a time decides what to send. */
export async function lockInvoice(db: pg.PoolClient, id: string): Promise<ChargeableInvoice | undefined> {
  const { rows } = await db.query<{
    id: string;
    organization_id: string;
    status: InvoiceStatus;
    amount_cents: string;
    currency: string;
    next_charge_at: Date | null;
  }>("SELECT id, organization_id, status, amount_cents, currency, next_charge_at FROM invoices WHERE id = $1 FOR UPDATE", [id]);
  const r = rows[0];
  return (
    r && {
      id: r.id,
      organizationId: r.organization_id,
      status: r.status,
      amountCents: Number(r.amount_cents),
      currency: r.currency,
      nextChargeAt: r.next_charge_at,
    }
  );
}

/** The attempt sent and not answered yet (or whose answer was lost), if any. */
export async function pendingAttempt(db: pg.PoolClient, invoiceId: string): Promise<ChargeAttempt | undefined> {
  const { rows } = await db.query<{
    invoice_id: string;
    attempt: number;
    idempotency_key: string;
    customer_ref: string;
    payment_method_id: string;
    payment_method_ref: string;
    amount_cents: string;
    currency: string;
    sent_at: Date;
  }>(
    `SELECT invoice_id, attempt, idempotency_key, customer_ref, payment_method_id, payment_method_ref, amount_cents, currency, sent_at
       FROM charge_attempts WHERE invoice_id = $1 AND status = 'pending'`,
    [invoiceId],
  );
  const r = rows[0];
  return (
    r && {
      invoiceId: r.invoice_id,
      attempt: r.attempt,
      idempotencyKey: r.idempotency_key,
      customerRef: r.customer_ref,
      paymentMethodId: r.payment_method_id,
      paymentMethodRef: r.payment_method_ref,
      amountCents: Number(r.amount_cents),
      currency: r.currency,
      sentAt: r.sent_at,
    }
  );
}

/** The organization's default payment method at this processor, and the processor's customer it belongs to. */
export async function findChargeTarget(
  db: pg.PoolClient,
  organizationId: string,
  processor: string,
): Promise<{ paymentMethodId: string; paymentMethodRef: string; customerRef: string } | undefined> {
  const { rows } = await db.query<{ id: string; processor_ref: string; customer_ref: string }>(
    `SELECT pm.id, pm.processor_ref, c.customer_ref
       FROM payment_methods pm
       JOIN processor_customers c ON c.organization_id = pm.organization_id AND c.processor = pm.processor
      WHERE pm.organization_id = $1 AND pm.is_default AND pm.processor = $2`,
    [organizationId, processor],
  );
  const r = rows[0];
  return r && { paymentMethodId: r.id, paymentMethodRef: r.processor_ref, customerRef: r.customer_ref };
}

/**
 * Records a new attempt as pending; committed before the processor is asked.
 * Its key names the invoice and the attempt number, so the attempt is sent
 * under the same key however often it has to be re-sent.
 */
export async function insertAttempt(
  db: pg.PoolClient,
  a: Omit<ChargeAttempt, "attempt" | "idempotencyKey">,
  processor: string,
): Promise<ChargeAttempt> {
  const { rows } = await db.query<{ attempt: number }>(
    "SELECT coalesce(max(attempt), 0) + 1 AS attempt FROM charge_attempts WHERE invoice_id = $1",
    [a.invoiceId],
  );
  const attempt = rows[0]!.attempt;
  const idempotencyKey = `dbaas-invoice-${a.invoiceId}-${attempt}`;
  await db.query(
    `INSERT INTO charge_attempts (invoice_id, attempt, idempotency_key, processor, customer_ref, payment_method_id,
                                  payment_method_ref, amount_cents, currency, status, created_at, sent_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $10)`,
    [
      a.invoiceId,
      attempt,
      idempotencyKey,
      processor,
      a.customerRef,
      a.paymentMethodId,
      a.paymentMethodRef,
      a.amountCents,
      a.currency,
      a.sentAt,
    ],
  );
  return { ...a, attempt, idempotencyKey };
}

export async function markResent(db: pg.PoolClient, invoiceId: string, attempt: number, at: Date): Promise<void> {
  await db.query("UPDATE charge_attempts SET sent_at = $3 WHERE invoice_id = $1 AND attempt = $2", [invoiceId, attempt, at]);
}

/**
 * Stores the answer to a pending attempt; false when it is no longer pending
 * (another charger sent the same key and stored the same answer first).
 */
export async function finishAttempt(
  db: pg.PoolClient,
  invoiceId: string,
  attempt: number,
  outcome: { status: "succeeded"; chargeRef: string } | { status: "declined" | "failed"; failure: string },
  at: Date,
): Promise<boolean> {
  const result = await db.query(
    `UPDATE charge_attempts SET status = $3, charge_ref = $4, failure = $5, finished_at = $6
      WHERE invoice_id = $1 AND attempt = $2 AND status = 'pending'`,
    [
      invoiceId,
      attempt,
      outcome.status,
      outcome.status === "succeeded" ? outcome.chargeRef : null,
      outcome.status === "succeeded" ? null : outcome.failure,
      at,
    ],
  );
  return result.rowCount === 1;
}

/** When the closer loop is next to charge the invoice. */
export async function setNextCharge(db: pg.PoolClient, invoiceId: string, at: Date): Promise<void> {
  await db.query("UPDATE invoices SET next_charge_at = $2 WHERE id = $1 AND status <> 'paid'", [invoiceId, at]);
}

export async function markPaid(db: pg.PoolClient, invoiceId: string, at: Date): Promise<void> {
  await db.query("UPDATE invoices SET status = 'paid', paid_at = $2, next_charge_at = NULL WHERE id = $1 AND status <> 'paid'", [
    invoiceId,
    at,
  ]);
}

/** Unpaid after its due date (issued due at once): charged again by the loop at `retryAt`, or on a new default. */
export async function markPastDue(db: pg.PoolClient, invoiceId: string, retryAt: Date): Promise<void> {
  await db.query("UPDATE invoices SET status = 'past_due', next_charge_at = $2 WHERE id = $1 AND status <> 'paid'", [invoiceId, retryAt]);
}

/** Invoices the loop is due to charge at `now`, oldest due first, other than `skip`. */
export async function dueInvoiceIds(db: pg.Pool, now: Date, skip: readonly string[], limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM invoices WHERE next_charge_at <= $1 AND id <> ALL ($2::text[])
      ORDER BY next_charge_at LIMIT $3`,
    [now, skip, limit],
  );
  return rows.map((r) => r.id);
}

export async function pastDueInvoiceIds(db: pg.Pool, organizationId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    "SELECT id FROM invoices WHERE organization_id = $1 AND status = 'past_due' ORDER BY period",
    [organizationId],
  );
  return rows.map((r) => r.id);
}
