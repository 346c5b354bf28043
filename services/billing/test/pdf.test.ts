import { describe, expect, it } from "vitest";
import type { InvoiceRecord } from "../src/db/invoices.ts";
import { invoiceFilename, invoicePdf } from "../src/invoices/pdf.ts";
import { renderPdf } from "../src/pdf.ts";
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
  it("is a well-formed PDF 1.4 document: every xref offset points at its object", async () => {
    for (const invoice of [paid, pastDue]) await checkPdf(await invoicePdf(invoice));
  });

  it("shows the company, the invoice, organization, period, dates, status, lines and total", async () => {
    const { shown } = await checkPdf(await invoicePdf(paid));
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

    const unpaid = (await checkPdf(await invoicePdf(pastDue))).shown;
    expect(unpaid).toEqual(expect.arrayContaining(["past due", "not paid", "USD 0.45", "2024-12 (2024-12-01 to 2024-12-31, UTC)"]));
  });

  it("fails the structure check when an offset or a length is off by one byte", async () => {
    const good = Buffer.from(await invoicePdf(paid)).toString("latin1");
    const entry = /\n(\d{10}) 00000 n \n/.exec(good)!;
    const shifted = good.replace(entry[0], `\n${String(Number(entry[1]) + 1).padStart(10, "0")} 00000 n \n`);
    await expect(checkPdf(Buffer.from(shifted, "latin1"))).rejects.toThrow(/object 1 at byte/);
    const longer = good.replace(/\/Length (\d+)/, (_, n: string) => `/Length ${Number(n) + 1}`);
    await expect(checkPdf(Buffer.from(longer, "latin1"))).rejects.toThrow(/Length/);
  });

  it("is named after the period and the invoice", () => {
    expect(invoiceFilename(paid)).toBe("invoice-2025-02-inv-k3x9a0b1c2d3e4f5.pdf");
  });

  it.skipIf(!hasPdftotext())("reads back with poppler's pdftotext, without repairs", async () => {
    const { text, warnings } = extractText(await invoicePdf(paid));
    expect(warnings).toBe("");
    for (const expected of [
      "dbaas",
      "inv-k3x9a0b1c2d3e4f5",
      "org-acme0000000001",
      "2025-02",
      "paid",
      "Compute, xlarge",
      "2572.0833",
      "USD 1234.56",
    ]) {
      expect(text).toContain(expected);
    }
    // A line's columns stay on one line of text.
    expect(text).toMatch(/Compute, micro\s+1\.25\s+hour\s+0\.03/);
  });

  it("lays the lines out as a table: a header, one row per line, numbers right-aligned, the total last", async () => {
    const { rows, items } = await checkPdf(await invoicePdf(paid));
    const header = rows.findIndex((r) => r[0] === "Description");
    expect(rows.slice(header, header + 4)).toEqual([
      ["Description", "Quantity", "Unit", "Amount (USD)"],
      ["Compute, micro", "1.25", "hour", "0.03"],
      ["Compute, xlarge", "2572.0833", "hour", "1234.53"],
      ["Total", "USD 1234.56"],
    ]);
    const rightEdges = (strs: string[]) => strs.map((s) => items.find((i) => i.str === s)!.right);
    for (const column of [
      ["Quantity", "1.25", "2572.0833"],
      ["Amount (USD)", "0.03", "1234.53", "USD 1234.56"],
    ]) {
      const edges = rightEdges(column);
      for (const edge of edges) expect(edge, column.join(", ")).toBeCloseTo(edges[0]!, 0);
    }
  });

  it("names the customer when the organization's name is known, in whatever script it is written", async () => {
    const name = "Ακμή Α.Ε. – Zürich, Москва, Երևան, Tbilisi თბილისი";
    const { rows, text } = await checkPdf(await invoicePdf(paid, name));
    expect(rows).toContainEqual(["Customer", name]);
    // A right-to-left word is laid out right to left.
    expect((await checkPdf(await invoicePdf(paid, "שלום"))).rows).toContainEqual(["Customer", "שלום"]);
    // What DejaVu Sans has no glyph for is a question mark, not an empty box that copies as nothing.
    expect((await checkPdf(await invoicePdf(paid, "Zürich 東京"))).rows).toContainEqual(["Customer", "Zürich ??"]);
    expect(rows).toContainEqual(["Organization", "org-acme0000000001"]);
    // The glyphs come from DejaVu Sans, embedded (subset), not from a standard font the reader substitutes.
    expect(text).toMatch(/\/BaseFont \/[A-Z]{6}\+DejaVuSans\n/);
    expect(text).toContain("/FontFile2");
    expect(text).not.toContain("Helvetica");

    // Without a name the line is not there.
    expect((await checkPdf(await invoicePdf(paid))).rows.some((r) => r[0] === "Customer")).toBe(false);
  });

  it.skipIf(!hasPdftotext())("a Unicode name reads back with pdftotext too", async () => {
    const { text, warnings } = extractText(await invoicePdf(paid, "Ακμή Α.Ε. – Москва"));
    expect(warnings).toBe("");
    expect(text).toMatch(/Customer\s+Ακμή Α\.Ε\. – Москва/);
  });

  it("flows a long invoice onto more pages, every line and a footer on each", async () => {
    const lines = Array.from({ length: 80 }, (_, i) => ({
      description: `Storage, volume ${i + 1}`,
      quantity: i + 1,
      unit: "GB-month",
      amountCents: 10 * (i + 1),
    }));
    const long: InvoiceRecord = { ...paid, lines, amountCents: lines.reduce((sum, l) => sum + l.amountCents, 0) };
    const { rows, pages, items } = await checkPdf(await invoicePdf(long));
    expect(pages).toBeGreaterThan(1);
    for (const [i, line] of lines.entries())
      expect(rows, line.description).toContainEqual([line.description, String(i + 1), "GB-month", (line.amountCents / 100).toFixed(2)]);
    expect(rows.at(-2)).toEqual(["Total", "USD 324.00"]);
    const footers = items.filter((i) => i.str === "dbaas - invoice inv-k3x9a0b1c2d3e4f5 - amounts in USD");
    expect(footers.map((f) => f.page)).toEqual(Array.from({ length: pages }, (_, i) => i + 1));
  });

  it("is the same bytes for the same invoice in the same state", async () => {
    const first = await invoicePdf(paid, "Acme");
    expect(Buffer.from(await invoicePdf(paid, "Acme")).equals(Buffer.from(first))).toBe(true);
    expect(Buffer.from(await invoicePdf(pastDue, "Acme")).equals(Buffer.from(first))).toBe(false);
  });
});

describe("PDF documents", () => {
  it("carry their title, creator and date in the document information", async () => {
    const { info } = await checkPdf(
      await renderPdf({ title: "a (title) with \\ backslash – ünïcode", createdAt: new Date("2025-03-01T00:00:07Z") }, (doc) =>
        doc.text("hello"),
      ),
    );
    expect(info).toMatchObject({
      Title: "a (title) with \\ backslash – ünïcode",
      Creator: "dbaas",
      Producer: "dbaas",
      CreationDate: "D:20250301000007Z",
    });
  });
});
