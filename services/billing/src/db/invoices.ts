import type pg from "pg";

type Db = pg.Pool | pg.PoolClient;

export type InvoiceStatus = "open" | "paid" | "past_due";

export interface InvoiceLineRecord {
  description: string;
  quantity: number;
  unit: string;
  amountCents: number;
}

export interface InvoiceRecord {
  id: string;
  organizationId: string;
  /** `YYYY-MM`. */
  period: string;
  amountCents: number;
  currency: string;
  status: InvoiceStatus;
  issuedAt: Date;
  dueAt: Date;
  paidAt: Date | null;
  lines: InvoiceLineRecord[];
}

interface InvoiceRow {
  id: string;
  organization_id: string;
  period: string;
  amount_cents: string;
  currency: string;
  status: InvoiceStatus;
  issued_at: Date;
  due_at: Date;
  paid_at: Date | null;
}

interface LineRow {
  invoice_id: string;
  description: string;
  quantity: string;
  unit: string;
  amount_cents: string;
}

const COLUMNS = "id, organization_id, to_char(period, 'YYYY-MM') AS period, amount_cents, currency, status, issued_at, due_at, paid_at";

/** A month as the `date` column stores it: its first day. */
const day = (monthStart: Date) => monthStart.toISOString().slice(0, 10);

async function withLines(db: Db, rows: InvoiceRow[]): Promise<InvoiceRecord[]> {
  if (rows.length === 0) return [];
  const lines = await db.query<LineRow>(
    `SELECT invoice_id, description, quantity, unit, amount_cents FROM invoice_lines
      WHERE invoice_id = ANY ($1::text[]) ORDER BY invoice_id, position`,
    [rows.map((r) => r.id)],
  );
  return rows.map((r) => ({
    id: r.id,
    organizationId: r.organization_id,
    period: r.period,
    amountCents: Number(r.amount_cents),
    currency: r.currency,
    status: r.status,
    issuedAt: r.issued_at,
    dueAt: r.due_at,
    paidAt: r.paid_at,
    lines: lines.rows
      .filter((l) => l.invoice_id === r.id)
      .map((l) => ({ description: l.description, quantity: Number(l.quantity), unit: l.unit, amountCents: Number(l.amount_cents) })),
  }));
}

/** An organization's invoices, newest period first. */
export async function listInvoices(db: Db, organizationId: string): Promise<InvoiceRecord[]> {
  const { rows } = await db.query<InvoiceRow>(`SELECT ${COLUMNS} FROM invoices WHERE organization_id = $1 ORDER BY period DESC`, [
    organizationId,
  ]);
  return await withLines(db, rows);
}

/** One of the organization's invoices; another organization's is not found. */
export async function findInvoice(db: Db, organizationId: string, id: string): Promise<InvoiceRecord | undefined> {
  const { rows } = await db.query<InvoiceRow>(`SELECT ${COLUMNS} FROM invoices WHERE id = $1 AND organization_id = $2`, [
    id,
    organizationId,
  ]);
  return (await withLines(db, rows))[0];
}

export async function hasPastDueInvoice(db: Db, organizationId: string): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM invoices WHERE organization_id = $1 AND status = 'past_due') AS found",
    [organizationId],
  );
  return rows[0]!.found;
}

export interface NewInvoice {
  id: string;
  organizationId: string;
  /** First instant of the month billed (UTC). */
  period: Date;
  currency: string;
  issuedAt: Date;
  lines: InvoiceLineRecord[];
}

/**
 * Issues the invoice, `open` and due at once, unless the organization already
 * has one for the period: then that one's amount is returned and nothing is
 * written.
 */
export async function insertInvoice(
  db: pg.PoolClient,
  invoice: NewInvoice,
): Promise<{ inserted: true } | { inserted: false; existingAmountCents: number }> {
  const amountCents = invoice.lines.reduce((sum, l) => sum + l.amountCents, 0);
  const inserted = await db.query(
    `INSERT INTO invoices (id, organization_id, period, amount_cents, currency, status, issued_at, due_at, next_charge_at)
     VALUES ($1, $2, $3::date, $4, $5, 'open', $6, $6, $6)
     ON CONFLICT (organization_id, period) DO NOTHING`,
    [invoice.id, invoice.organizationId, day(invoice.period), amountCents, invoice.currency, invoice.issuedAt],
  );
  if (inserted.rowCount === 0) {
    const { rows } = await db.query<{ amount_cents: string }>(
      "SELECT amount_cents FROM invoices WHERE organization_id = $1 AND period = $2::date",
      [invoice.organizationId, day(invoice.period)],
    );
    // The row the conflict was with: invoices are never deleted.
    return { inserted: false, existingAmountCents: Number(rows[0]!.amount_cents) };
  }
  await db.query(
    `INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit, amount_cents)
     SELECT $1, l.position, l.description, l.quantity, l.unit, l.amount_cents
       FROM unnest($2::int[], $3::text[], $4::numeric[], $5::text[], $6::bigint[])
            AS l(position, description, quantity, unit, amount_cents)`,
    [
      invoice.id,
      invoice.lines.map((_, i) => i + 1),
      invoice.lines.map((l) => l.description),
      invoice.lines.map((l) => l.quantity),
      invoice.lines.map((l) => l.unit),
      invoice.lines.map((l) => l.amountCents),
    ],
  );
  return { inserted: true };
}

/**
 * The next organization with a month ended before `before` still to close,
 * locked for this transaction; organizations another closer holds, and those
 * in `skip`, are passed over.
 */
export async function claimScheduledOrganization(
  db: pg.PoolClient,
  before: Date,
  skip: readonly string[],
): Promise<{ organizationId: string; nextPeriod: Date } | undefined> {
  const { rows } = await db.query<{ organization_id: string; next_period: string }>(
    `SELECT organization_id, to_char(next_period, 'YYYY-MM-DD') AS next_period FROM invoice_schedule
      WHERE next_period < $1::date AND organization_id <> ALL ($2::text[])
      ORDER BY next_period LIMIT 1
        FOR UPDATE SKIP LOCKED`,
    [day(before), skip],
  );
  const row = rows[0];
  return row && { organizationId: row.organization_id, nextPeriod: new Date(`${row.next_period}T00:00:00Z`) };
}

/** Months before `nextPeriod` are closed for the organization. */
export async function setNextPeriod(db: pg.PoolClient, organizationId: string, nextPeriod: Date): Promise<void> {
  await db.query("UPDATE invoice_schedule SET next_period = $2::date WHERE organization_id = $1", [organizationId, day(nextPeriod)]);
}

/**
 * Schedules months for closing: each organization's next period moves back to
 * the month given (`YYYY-MM-DD`, a first day) when that is earlier, so usage
 * delivered late for a month already closed without an invoice is invoiced.
 * Rows are locked in organization order, as status events lock them.
 */
export async function scheduleMonths(db: pg.PoolClient, earliest: Map<string, string>): Promise<void> {
  if (earliest.size === 0) return;
  const entries = [...earliest].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  await db.query(
    `INSERT INTO invoice_schedule (organization_id, next_period)
     SELECT * FROM unnest($1::text[], $2::date[])
     ON CONFLICT (organization_id) DO UPDATE SET next_period = excluded.next_period
      WHERE invoice_schedule.next_period > excluded.next_period`,
    [entries.map(([org]) => org), entries.map(([, month]) => month)],
  );
}
