import type pg from "pg";
import { withTransaction } from "@dbaas/kit";
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
 * provided it is this organization's.
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
  const existing = await db.query<PaymentMethodRow>(
    `SELECT ${COLUMNS} FROM payment_methods WHERE processor = $1 AND processor_ref = $2 AND organization_id = $3`,
    [m.processor, m.card.ref, m.organizationId],
  );
  if (!existing.rows[0]) throw new Error(`processor ${m.processor} gave an instrument of another organization`);
  return existing.rows[0];
}

export async function listPaymentMethods(db: Db, organizationId: string): Promise<PaymentMethodRow[]> {
  const { rows } = await db.query<PaymentMethodRow>(
    `SELECT ${COLUMNS} FROM payment_methods WHERE organization_id = $1 ORDER BY created_at, seq`,
    [organizationId],
  );
  return rows;
}

export async function findPaymentMethod(db: Db, organizationId: string, id: string): Promise<PaymentMethodRow | undefined> {
  const { rows } = await db.query<PaymentMethodRow>(
    `SELECT ${COLUMNS} FROM payment_methods WHERE id = $1 AND organization_id = $2`,
    [id, organizationId],
  );
  return rows[0];
}

/** Makes `id` the organization's default; call under lockPaymentMethods. The old default is cleared first for the unique index. */
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
  return rows[0].found;
}
