import type { InvoiceRecord } from "../db/invoices.ts";
import { PAGE_HEIGHT, writePdf, type PdfRule, type PdfText } from "../pdf.ts";

/** Who issues the invoices. */
const COMPANY_NAME = "dbaas";

const LEFT = 50;
const RIGHT = 545;
// Table columns: quantity right-aligned at its edge, unit after it, amount at the right margin.
const QUANTITY_RIGHT = 360;
const UNIT_LEFT = 375;

const date = (d: Date) => d.toISOString().slice(0, 10);
const formatCents = (cents: number) => (cents / 100).toFixed(2);
const formatQuantity = (q: number) => String(Number(q.toFixed(4)));

/** The last day of a `YYYY-MM` month. */
function lastDay(period: string): string {
  const [y, m] = period.split("-").map(Number);
  return date(new Date(Date.UTC(y, m, 0)));
}

/** The file name a download of the invoice is offered under. */
export function invoiceFilename(invoice: InvoiceRecord): string {
  return `invoice-${invoice.period}-${invoice.id}.pdf`;
}

/** The invoice as a one-page PDF: who, what period, when, its status, the lines and the total. */
export function invoicePdf(invoice: InvoiceRecord): Uint8Array {
  const texts: PdfText[] = [];
  const rules: PdfRule[] = [];
  let y = PAGE_HEIGHT - 70;

  texts.push({ x: LEFT, y, size: 24, text: COMPANY_NAME });
  texts.push({ x: RIGHT, y, size: 18, text: "Invoice", align: "right" });
  y -= 16;
  texts.push({ x: LEFT, y, size: 9, text: "Managed PostgreSQL" });

  y -= 40;
  const facts: [string, string][] = [
    ["Invoice", invoice.id],
    ["Organization", invoice.organizationId],
    ["Period", `${invoice.period} (${invoice.period}-01 to ${lastDay(invoice.period)}, UTC)`],
    ["Issued", date(invoice.issuedAt)],
    ["Due", date(invoice.dueAt)],
    ["Paid", invoice.paidAt ? date(invoice.paidAt) : "not paid"],
    ["Status", invoice.status.replace("_", " ")],
  ];
  for (const [label, value] of facts) {
    texts.push({ x: LEFT, y, size: 10, text: label });
    texts.push({ x: LEFT + 90, y, size: 10, text: value });
    y -= 16;
  }

  y -= 24;
  texts.push({ x: LEFT, y, size: 10, text: "Description" });
  texts.push({ x: QUANTITY_RIGHT, y, size: 10, text: "Quantity", align: "right" });
  texts.push({ x: UNIT_LEFT, y, size: 10, text: "Unit" });
  texts.push({ x: RIGHT, y, size: 10, text: `Amount (${invoice.currency})`, align: "right" });
  y -= 8;
  rules.push({ x1: LEFT, y1: y, x2: RIGHT, y2: y });
  for (const line of invoice.lines) {
    y -= 16;
    texts.push({ x: LEFT, y, size: 10, text: line.description });
    texts.push({ x: QUANTITY_RIGHT, y, size: 10, text: formatQuantity(line.quantity), align: "right" });
    texts.push({ x: UNIT_LEFT, y, size: 10, text: line.unit });
    texts.push({ x: RIGHT, y, size: 10, text: formatCents(line.amountCents), align: "right" });
  }
  y -= 10;
  rules.push({ x1: LEFT, y1: y, x2: RIGHT, y2: y });
  y -= 18;
  texts.push({ x: UNIT_LEFT, y, size: 12, text: "Total" });
  texts.push({ x: RIGHT, y, size: 12, text: `${invoice.currency} ${formatCents(invoice.amountCents)}`, align: "right" });

  texts.push({ x: LEFT, y: 50, size: 8, text: `${COMPANY_NAME} - invoice ${invoice.id} - amounts in ${invoice.currency}` });
  return writePdf({ title: `Invoice ${invoice.id} (${invoice.period})`, texts, rules });
}
