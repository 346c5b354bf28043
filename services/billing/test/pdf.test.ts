import { describe, expect, it } from "vitest";
import type { InvoiceRecord } from "../src/db/invoices.ts";
import { invoiceFilename, invoicePdf } from "../src/invoices/pdf.ts";
import { textWidth, writePdf } from "../src/pdf.ts";
import { checkPdf, extractText, hasPdftotext } from "./pdf-check.ts";

const paid: InvoiceRecord = {
  id: "inv-k3x9a0b1c2d3e4f5",
  organizationId: "org-acme0000000001",
  period: "2025-02",
  amountCents: 123_456,
  currency: "USD",
  status: "paid",
  issuedAt: new Date("2025-03-01T00:00:07Z"),
  dueAt: new Date("2025-03-01T00:00:07Z"),
  paidAt: new Date("2025-03-02T09:30:00Z"),
  lines: [
    { description: "Compute, micro", quantity: 1.25, unit: "hour", amountCents: 3 },
    { description: "Compute, xlarge", quantity: 2572.0833, unit: "hour", amountCents: 123_453 },
  ],
};

const pastDue: InvoiceRecord = {
  ...paid,
  id: "inv-pastdue000000000",
  period: "2024-12",
  amountCents: 45,
  status: "past_due",
  paidAt: null,
  lines: [{ description: "Compute, small", quantity: 7.5, unit: "hour", amountCents: 45 }],
};

describe("invoice PDF", () => {
  it("is a well-formed PDF 1.4 document: every xref offset points at its object", () => {
    for (const invoice of [paid, pastDue]) checkPdf(invoicePdf(invoice));
  });

  it("shows the company, the invoice, organization, period, dates, status, lines and total", () => {
    const { shown } = checkPdf(invoicePdf(paid));
    for (const text of [
      "dbaas",
      "inv-k3x9a0b1c2d3e4f5",
      "org-acme0000000001",
      "2025-02 (2025-02-01 to 2025-02-28, UTC)",
      "2025-03-01",
      "2025-03-02",
      "paid",
      "Compute, micro",
      "1.25",
      "0.03",
      "Compute, xlarge",
      "2572.0833",
      "1234.53",
      "hour",
      "USD 1234.56",
    ]) {
      expect(shown, text).toContain(text);
    }
    // Issued and due, then paid.
    expect(shown.filter((s) => /^\d{4}-\d{2}-\d{2}$/.test(s))).toEqual(["2025-03-01", "2025-03-01", "2025-03-02"]);

    const unpaid = checkPdf(invoicePdf(pastDue)).shown;
    expect(unpaid).toEqual(expect.arrayContaining(["past due", "not paid", "USD 0.45", "2024-12 (2024-12-01 to 2024-12-31, UTC)"]));
  });

  it("fails the structure check when an offset or a length is off by one byte", () => {
    const good = Buffer.from(invoicePdf(paid)).toString("latin1");
    const entry = /\n(\d{10}) 00000 n \n/.exec(good)!;
    const shifted = good.replace(entry[0], `\n${String(Number(entry[1]) + 1).padStart(10, "0")} 00000 n \n`);
    expect(() => checkPdf(Buffer.from(shifted, "latin1"))).toThrow(/object 1 at byte/);
    const longer = good.replace(/\/Length (\d+)/, (_, n: string) => `/Length ${Number(n) + 1}`);
    expect(() => checkPdf(Buffer.from(longer, "latin1"))).toThrow(/Length/);
  });

  it("is named after the period and the invoice", () => {
    expect(invoiceFilename(paid)).toBe("invoice-2025-02-inv-k3x9a0b1c2d3e4f5.pdf");
  });

  it.skipIf(!hasPdftotext())("reads back with poppler's pdftotext, without repairs", () => {
    const { text, warnings } = extractText(invoicePdf(paid));
    expect(warnings).toBe("");
    for (const expected of ["dbaas", "inv-k3x9a0b1c2d3e4f5", "org-acme0000000001", "2025-02", "paid", "Compute, xlarge", "2572.0833", "USD 1234.56"]) {
      expect(text).toContain(expected);
    }
    // A line's columns stay on one line of text.
    expect(text).toMatch(/Compute, micro\s+1\.25\s+hour\s+0\.03/);
  });
});

describe("PDF writer", () => {
  it("escapes what a literal string cannot hold and keeps offsets right", () => {
    const pdf = writePdf({
      title: "a (title) with \\ backslash",
      texts: [
        { x: 10, y: 10, size: 10, text: "(parens) and \\ backslash" },
        { x: 10, y: 30, size: 10, text: "Zürich – 東京" },
      ],
    });
    const { shown, text } = checkPdf(pdf);
    expect(shown).toEqual(["(parens) and \\ backslash", "Zürich ? ??"]);
    expect(text).toContain("/Title (a \\(title\\) with \\\\ backslash)");
    // Latin-1 letters are one byte each, as WinAnsiEncoding has them.
    expect(Buffer.from(pdf).includes(Buffer.from("Z\xfcrich", "latin1"))).toBe(true);
  });

  it("right-aligns by Helvetica's widths", () => {
    // Digits are 556/1000 em, the period 278.
    expect(textWidth("12.34", 10)).toBeCloseTo(4 * 5.56 + 2.78);
    const { text } = checkPdf(writePdf({ title: "t", texts: [{ x: 100, y: 10, size: 10, text: "10.00", align: "right" }] }));
    expect(text).toContain(`BT /F1 10 Tf ${(100 - (4 * 5.56 + 2.78)).toFixed(2)} 10 Td (10.00) Tj ET`);
  });
});
