import { ALERT_CHANNELS, PAYMENT_METHOD_TYPES } from "@dbaas/catalogue";
import type { Alert, GetUsageResponse, Invoice, InvoiceLine, PaymentMethod, UsageLine } from "@dbaas/proto/billing";
import { iso } from "./mappers.ts";
import { arrayOf, dateTime, field, id, int, nullableDateTime, num, oneOf, record, str, titled } from "./record.ts";

/*
 * The records of billing: usage, payment methods, invoices and spending
 * alerts (record.ts), spread into responses.ts's index.
 */

const INVOICE_STATUSES = ["open", "paid", "past_due"];

/** A meter's line; a billing without it (none used) answers nothing, read as 0. */
const quantity = (l: UsageLine | undefined) => l?.quantity ?? 0;
const amount = field(num(), (l: UsageLine | undefined) => l?.amount ?? 0);

const COMPUTE = record<UsageLine | undefined>("Running time.")({ hours: field(num(), quantity), amount });
const STORAGE = record<UsageLine | undefined>("Stored data.")({ gb: field(num("GB-months."), quantity), amount });
const DATA_TRANSFER = record<UsageLine | undefined>("Data transferred.")({ gb: field(num(), quantity), amount });
const REPLICAS = record<UsageLine | undefined>("Replica running time.")({ hours: field(num(), quantity), amount });

const PERIOD = record<GetUsageResponse>("The billing period, half-open.")({
  start: field(dateTime(), (res) => iso(res.periodStart)),
  end: field(dateTime("First instant of the next month."), (res) => iso(res.periodEnd)),
});

const METERS = record<GetUsageResponse>("Quantities and amounts per meter.")({
  compute: field(titled("UsageHours", COMPUTE.schema), (res) => COMPUTE.map(res.computeHours)),
  storage: field(titled("UsageGB", STORAGE.schema), (res) => STORAGE.map(res.storageGb)),
  data_transfer: field(titled("UsageGB", DATA_TRANSFER.schema), (res) => DATA_TRANSFER.map(res.dataTransferGb)),
  replicas: field(titled("UsageHours", REPLICAS.schema), (res) => REPLICAS.map(res.replicaHours)),
});

/** Month-to-date usage of the caller's organization (docs/product.md, Billing). */
export const USAGE = record<GetUsageResponse>("Month-to-date usage of the organization and its price.")({
  period: field(PERIOD.schema, PERIOD.map),
  usage: field(METERS.schema, METERS.map),
  total: field(num(), (res) => res.total),
  currency: field(str("Three-letter currency code."), (res) => res.currency),
});

/** A payment method as every route shows it: what the processor reports about the card, never its number. */
export const PAYMENT_METHOD = record<PaymentMethod>(
  "A payment method: what the payment processor reports about the card it holds, never its number.",
)({
  id: field(id("pm-"), (pm) => pm.id),
  type: field(oneOf(PAYMENT_METHOD_TYPES), (pm) => pm.type),
  brand: field(str("Lowercase card brand as the processor names it (`visa`, `mastercard`, …)."), (pm) => pm.brand),
  last4: field({ type: "string", pattern: "^[0-9]{4}$", description: "Last four digits of the card number." }, (pm) => pm.last4),
  exp_month: field({ type: "integer", minimum: 1, maximum: 12 }, (pm) => pm.expMonth),
  exp_year: field(int(), (pm) => pm.expYear),
  default: field(
    { type: "boolean", description: "Whether invoices are charged to it; an organization has at most one default." },
    (pm) => pm.isDefault,
  ),
  created_at: field(dateTime(), (pm) => iso(pm.createdAt)),
});

const INVOICE_LINE = record<InvoiceLine>("One priced line.")({
  description: field(str("What was used, e.g. `Compute, small`."), (l) => l.description),
  quantity: field(num(), (l) => l.quantity),
  unit: field(oneOf(["hour", "GB-month", "GB"]), (l) => l.unit),
  amount: field(num("Rounded to cents."), (l) => l.amount),
});

/** An invoice and the gateway's public base URL, which serves its PDF. */
export interface InvoiceAt {
  invoice: Invoice;
  publicBaseUrl: string;
}

/** docs/product.md, Billing. The PDF is served by this gateway, so pdf_url is under its public base URL. */
export const INVOICE = record<InvoiceAt>(
  "The bill of one calendar month (UTC), issued after the month ended and charged to the default payment method.",
)({
  id: field(id("inv-"), ({ invoice }) => invoice.id),
  period: field(
    { type: "string", pattern: "^[0-9]{4}-(0[1-9]|1[0-2])$", description: "The month billed, `YYYY-MM`." },
    ({ invoice }) => invoice.period,
  ),
  amount: field(num("Sum of the lines' amounts."), ({ invoice }) => invoice.amount),
  currency: field(str("Three-letter currency code."), ({ invoice }) => invoice.currency),
  status: field(
    oneOf(
      INVOICE_STATUSES,
      "`open`: issued, the charge not made yet or being retried; `paid`; `past_due`: the charge was declined or there was no payment method.",
    ),
    ({ invoice }) => invoice.status,
  ),
  issued_at: field(dateTime(), ({ invoice }) => iso(invoice.issuedAt)),
  due_at: field(dateTime("The charge is attempted when the invoice is issued: the same instant."), ({ invoice }) => iso(invoice.dueAt)),
  paid_at: field(nullableDateTime("Null until paid."), ({ invoice }) => iso(invoice.paidAt)),
  pdf_url: field(
    { type: "string", format: "uri", description: "The invoice as a PDF (GET with the same credential)." },
    ({ invoice, publicBaseUrl }) => `${publicBaseUrl}/v1/billing/invoices/${encodeURIComponent(invoice.id)}/pdf`,
  ),
  lines: field(arrayOf(titled("InvoiceLine", INVOICE_LINE.schema)), ({ invoice }) => invoice.lines.map(INVOICE_LINE.map)),
});

export const ALERT = record<Alert>("A spending alert: fires at most once per calendar month (UTC).")({
  id: field(id("alr-"), (a) => a.id),
  threshold: field(num("Month-to-date total, in `currency`, at which the alert fires."), (a) => a.threshold),
  currency: field(str("Three-letter currency code."), (a) => a.currency),
  channels: field(arrayOf(oneOf(ALERT_CHANNELS, "`email`: a mail to every member who may read billing.")), (a) => a.channels),
  created_at: field(dateTime(), (a) => iso(a.createdAt)),
});
