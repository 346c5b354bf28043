import type { InvoiceRecord } from "../db/invoices.ts";
import { FONT, printable, renderPdf } from "../pdf.ts";

/** Who issues the invoices. */
const COMPANY_NAME = "dbaas";

const date = (d: Date) => d.toISOString().slice(0, 10);
const formatCents = (cents: number) => (cents / 100).toFixed(2);
const formatQuantity = (q: number) => String(Number(q.toFixed(4)));

/** The last day of a `YYYY-MM` month. */
function lastDay(period: string): string {
  const [y = NaN, m = NaN] = period.split("-").map(Number);
  return date(new Date(Date.UTC(y, m, 0)));
}

/** The file name a download of the invoice is offered under. */
export function invoiceFilename(invoice: InvoiceRecord): string {
  return `invoice-${invoice.period}-${invoice.id}.pdf`;
}

type Sides = [number, number, number, number];

/** Cells without borders, as the facts at the top are laid out. */
const PLAIN: PDFKit.Mixins.CellStyle = { border: false, padding: [2, 0] };
// The lines' columns: description takes what the others leave; numbers right-aligned.
const LINE_COLUMNS: PDFKit.Mixins.ColumnStyle[] = [
  { width: "*" },
  { width: 90, align: { x: "right" } },
  { width: 60 },
  { width: 110, align: { x: "right" } },
];
// Border widths, top, right, bottom, left: a rule under the header and above the total.
const RULE_BELOW: Sides = [0, 0, 0.5, 0];
const RULE_ABOVE: Sides = [0.5, 0, 0, 0];

/**
 * The invoice as a PDF: who issues it, to whom (the organization's name when
 * known, and its id), the period, dates and status, a table of the lines and
 * the total; a footer on every page. The date of the document is the invoice's
 * issue, so the same invoice in the same state is the same bytes.
 */
export function invoicePdf(invoice: InvoiceRecord, organizationName?: string): Promise<Uint8Array> {
  const title = `Invoice ${invoice.id} (${invoice.period})`;
  return renderPdf({ title, createdAt: invoice.issuedAt }, (doc) => {
    const left = doc.page.margins.left;
    const width = doc.page.width - left - doc.page.margins.right;

    doc.font(FONT.bold).fontSize(24).text(COMPANY_NAME, left, 50, { lineBreak: false });
    doc.fontSize(18).text("Invoice", left, 56, { width, align: "right" });
    doc.font(FONT.regular).fontSize(9).text("Managed PostgreSQL", left, 82);

    const facts: [string, string][] = [
      ...(organizationName ? [["Customer", printable(organizationName)] as [string, string]] : []),
      ["Invoice", invoice.id],
      ["Organization", invoice.organizationId],
      ["Period", `${invoice.period} (${invoice.period}-01 to ${lastDay(invoice.period)}, UTC)`],
      ["Issued", date(invoice.issuedAt)],
      ["Due", date(invoice.dueAt)],
      ["Paid", invoice.paidAt ? date(invoice.paidAt) : "not paid"],
      ["Status", invoice.status.replace("_", " ")],
    ];
    doc.fontSize(10).table({
      position: { x: left, y: 120 },
      columnStyles: [90, "*"],
      defaultStyle: PLAIN,
      data: facts,
    });

    doc.moveDown(2);
    const header = ["Description", "Quantity", "Unit", `Amount (${invoice.currency})`].map((text) => ({
      text,
      type: "TH" as const,
      font: { src: FONT.bold },
      border: RULE_BELOW,
    }));
    const lines = invoice.lines.map((line) => [
      printable(line.description),
      formatQuantity(line.quantity),
      line.unit,
      formatCents(line.amountCents),
    ]);
    const total: PDFKit.Mixins.CellOptions[] = [
      { text: "", colSpan: 2, border: RULE_ABOVE },
      { text: "Total", border: RULE_ABOVE, font: { src: FONT.bold, size: 12 } },
      { text: `${invoice.currency} ${formatCents(invoice.amountCents)}`, border: RULE_ABOVE, font: { src: FONT.bold, size: 12 } },
    ];
    doc.table({
      position: { x: left },
      columnStyles: LINE_COLUMNS,
      defaultStyle: { border: false, padding: [4, 4] },
      data: [header, ...lines, total],
    });

    // The footer sits in the bottom margin, where pdfkit would otherwise start a new page.
    const footer = `${COMPANY_NAME} - invoice ${invoice.id} - amounts in ${invoice.currency}`;
    const pages = doc.bufferedPageRange();
    for (let i = pages.start; i < pages.start + pages.count; i++) {
      doc.switchToPage(i);
      const bottom = doc.page.margins.bottom;
      doc.page.margins.bottom = 0;
      doc
        .font(FONT.regular)
        .fontSize(8)
        .text(footer, left, doc.page.height - 40, { lineBreak: false });
      doc.page.margins.bottom = bottom;
    }
  });
}
