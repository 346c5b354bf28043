import type pg from "pg";
import { invalidArgument, withTransaction } from "@dbaas/kit";
import type { AttachedCard } from "../processor/processor.ts";

type Db = pg.Pool | pg.PoolClient;

export interface PaymentMethodRow {
  id: string;
  organization_id: string;
  type: string;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  is_default: boolean;
  created_at: Date;
}

const COLUMNS = "id, organization_id, type, brand, last4, exp_month, exp_year, is_default, created_at";

/**
 * Serialises, per organization, the transactions that decide which payment
 * method is the default: under READ COMMITTED two of them could otherwise both
 * see "no default yet", or both clear the old default and set their own. The
 * unique index stays as the backstop.
 */
export async function lockPaymentMethods(db: pg.PoolClient, organizationId: string): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`billing:payment-methods:${organizationId}`]);
}

export async function findCustomer(db: Db, processor: string, organizationId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ customer_ref: string }>(
    "SELECT customer_ref FROM processor_customers WHERE organization_id = $1 AND processor = $2",
    [organizationId, processor],
  );
  return rows[0]?.customer_ref;
}

/**
 * The processor's customer of the organization, created on its first payment
 * method. The lock, held across the processor call, keeps two concurrent first
 * adds from creating two customers; it is taken once per organization.
 */
export async function ensureCustomer(
  pool: pg.Pool,
  processor: string,
  organizationId: string,
  create: () => Promise<string>,
): Promise<string> {
  const known = await findCustomer(pool, processor, organizationId);
  if (known) return known;
  return await withTransaction(pool, async (db) => {
    await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`billing:customer:${organizationId}`]);
    const raced = await findCustomer(db, processor, organizationId);
    if (raced) return raced;
    const ref = await create();
    await db.query("INSERT INTO processor_customers (organization_id, processor, customer_ref) VALUES ($1, $2, $3)", [
      organizationId,
      processor,
      ref,
    ]);
    return ref;
  });
}

export interface NewPaymentMethod {
  id: string;
  organizationId: string;
  processor: string;
  card: AttachedCard;
  createdAt: Date;
}

/**
 * Stores a card the processor attached; it becomes the default when the
 * organization has none. Call under lockPaymentMethods. A processor ref already
 * stored is a replayed answer to a retried add: the row it made is returned,
 * provided it is this organization's and not removed since (a processor
 * replaying an instrument we detached: Stripe does, for a request repeated
 * within a day with the same token, and a real token is single-use anyway).
 */
export async function insertPaymentMethod(db: pg.PoolClient, m: NewPaymentMethod): Promise<PaymentMethodRow> {
  const inserted = await db.query<PaymentMethodRow>(
    `INSERT INTO payment_methods (id, organization_id, processor, processor_ref, type, brand, last4, exp_month, exp_year, is_default, created_at)
     VALUES ($1, $2, $3, $4, 'card', $5, $6, $7, $8,
             NOT EXISTS (SELECT 1 FROM payment_methods WHERE organization_id = $2 AND is_default), $9)
     ON CONFLICT (processor, processor_ref) DO NOTHING
     RETURNING ${COLUMNS}`,
    [m.id, m.organizationId, m.processor, m.card.ref, m.card.brand, m.card.last4, m.card.expMonth, m.card.expYear, m.createdAt],
  );
  if (inserted.rows[0]) return inserted.rows[0];
  const existing = await db.query<PaymentMethodRow & { removed: boolean }>(
    `SELECT ${COLUMNS}, removed_at IS NOT NULL AS removed FROM payment_methods WHERE processor = $1 AND processor_ref = $2 AND organization_id = $3`,
    [m.processor, m.card.ref, m.organizationId],
  );
  const row = existing.rows[0];
  if (!row) throw new Error(`processor ${m.processor} gave an instrument of another organization`);
  if (row.removed) {
    throw invalidArgument(
      [{ field: "token", message: "was already used for a payment method that has since been removed; use a new token" }],
      "the token was already used",
    );
  }
  const { removed: _removed, ...method } = row;
  return method;
}

export async function listPaymentMethods(db: Db, organizationId: string): Promise<PaymentMethodRow[]> {
  const { rows } = await db.query<PaymentMethodRow>(
    `SELECT ${COLUMNS} FROM payment_methods WHERE organization_id = $1 AND removed_at IS NULL ORDER BY created_at, seq`,
    [organizationId],
  );
  return rows;
}

export async function findPaymentMethod(db: Db, organizationId: string, id: string): Promise<PaymentMethodRow | undefined> {
  const { rows } = await db.query<PaymentMethodRow>(
    `SELECT ${COLUMNS} FROM payment_methods WHERE id = $1 AND organization_id = $2 AND removed_at IS NULL`,
    [id, organizationId],
  );
  return rows[0];
}

/** Makes `id` (not removed) the organization's default; call under lockPaymentMethods. The old default is cleared first for the unique index. */
export async function makeDefault(db: pg.PoolClient, organizationId: string, id: string): Promise<void> {
  await db.query("UPDATE payment_methods SET is_default = false WHERE organization_id = $1 AND is_default AND id <> $2", [
    organizationId,
    id,
  ]);
  await db.query("UPDATE payment_methods SET is_default = true WHERE id = $1 AND organization_id = $2", [id, organizationId]);
}

export async function hasDefaultPaymentMethod(db: Db, organizationId: string): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM payment_methods WHERE organization_id = $1 AND is_default) AS found",
    [organizationId],
  );
  return rows[0]!.found;
}

/** How many payment methods the organization has, removed ones not counted. */
export async function countPaymentMethods(db: Db, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM payment_methods WHERE organization_id = $1 AND removed_at IS NULL",
    [organizationId],
  );
  return rows[0]!.n;
}

/** Removes a method (call under lockPaymentMethods, having found it): it stops being listed, charged and the default. */
export async function removePaymentMethod(db: pg.PoolClient, organizationId: string, id: string, now: Date): Promise<void> {
  await db.query(
    "UPDATE payment_methods SET removed_at = $3, is_default = false WHERE id = $1 AND organization_id = $2 AND removed_at IS NULL",
    [id, organizationId, now],
  );
}

/** A removed payment method the processor still has to let go of. */
export interface Detachment {
  id: string;
  organizationId: string;
  processor: string;
  processorRef: string;
  customerRef: string;
}

/**
 * Removed methods not detached yet at `processor`, removed longest ago first,
 * other than `skip`; `id` narrows it to one.
 */
export async function pendingDetachments(
  db: Db,
  processor: string,
  opts: { id?: string; skip?: readonly string[]; limit: number },
): Promise<Detachment[]> {
  const { rows } = await db.query<{ id: string; organization_id: string; processor_ref: string; customer_ref: string }>(
    `SELECT pm.id, pm.organization_id, pm.processor_ref, c.customer_ref
       FROM payment_methods pm
       JOIN processor_customers c ON c.organization_id = pm.organization_id AND c.processor = pm.processor
      WHERE pm.removed_at IS NOT NULL AND pm.detached_at IS NULL AND pm.processor = $1
        AND ($2::text IS NULL OR pm.id = $2) AND pm.id <> ALL ($3::text[])
      ORDER BY pm.removed_at, pm.id LIMIT $4`,
    [processor, opts.id ?? null, opts.skip ?? [], opts.limit],
  );
  return rows.map((r) => ({
    id: r.id,
    organizationId: r.organization_id,
    processor,
    processorRef: r.processor_ref,
    customerRef: r.customer_ref,
  }));
}

export async function markDetached(db: Db, id: string, now: Date): Promise<void> {
  await db.query("UPDATE payment_methods SET detached_at = $2 WHERE id = $1 AND removed_at IS NOT NULL AND detached_at IS NULL", [id, now]);
}
