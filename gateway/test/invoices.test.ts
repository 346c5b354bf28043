/**
 * The invoice routes against the stub billing service: the public record and
 * its pdf_url under the public base URL, paid_at null until paid, the list's
 * pages, the PDF arriving byte for byte as an attachment, another
 * organization's invoice as 404, and the permission both routes need.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { InvoiceSchema } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;

const OWNER = "tok-inv-owner";
const OTHER = "tok-inv-other-org";
const ADMIN = "tok-inv-admin";
const NOBODY = "tok-inv-nothing";
const PATH = "/v1/billing/invoices";
const BASE_URL = "https://api.example.test";

/**
 * Bytes no text decoding survives: a PDF header with its binary marker, every
 * byte value, NULs and invalid UTF-8, long enough to take several writes.
 */
function pdfBytes(seed: number): Buffer {
  const head = Buffer.from("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "latin1");
  const body = Buffer.alloc(200_000);
  for (let i = 0; i < body.length; i++) body[i] = (i * 31 + seed) & 0xff;
  return Buffer.concat([head, body, Buffer.from("\n%%EOF\n")]);
}

const at = (iso: string) => timestampFromDate(new Date(iso));

function seed(org: string, id: string, period: string, paidAt?: string, filename = `invoice-${period}-${id}.pdf`) {
  const invoice = create(InvoiceSchema, {
    id,
    organizationId: org,
    period,
    amount: 7.47,
    currency: "USD",
    status: paidAt ? "paid" : "past_due",
    issuedAt: at(`${period}-01T00:00:00Z`),
    dueAt: at(`${period}-01T00:00:00Z`),
    paidAt: paidAt ? at(paidAt) : undefined,
    lines: [
      { description: "Compute, small", quantity: 120, unit: "hour", amount: 7.2 },
      { description: "Storage", quantity: 2.15, unit: "GB-month", amount: 0.27 },
    ],
  });
  const pdf = pdfBytes(id.length);
  stubs.state.invoices.push({ invoice, pdf, filename });
  return pdf;
}

let paidPdf: Buffer;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(OWNER, principal({ org: "org-inv", permissions: ALL_PERMISSIONS }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-inv-other", permissions: ALL_PERMISSIONS }));
  stubs.state.tokens.set(ADMIN, principal({ org: "org-inv", permissions: ALL_PERMISSIONS.filter((p) => p !== "billing:write") }));
  stubs.state.tokens.set(NOBODY, principal({ org: "org-inv", permissions: ["databases:read", "members:read"] }));
  paidPdf = seed("org-inv", "inv-0001", "2025-01", "2025-02-01T00:00:05Z");
  seed("org-inv", "inv-0002", "2025-02");
  seed("org-inv-other", "inv-0003", "2025-02", "2025-03-01T00:00:03Z");
  gw = await startGateway(stubs, { PUBLIC_BASE_URL: `${BASE_URL}/` });
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

const pdfPath = (url: string) => {
  expect(url.startsWith(`${BASE_URL}/v1/`), url).toBe(true);
  return url.slice(BASE_URL.length);
};

describe("GET /v1/billing/invoices", () => {
  it("lists the organization's invoices, newest period first, with pdf_url under the public base URL", async () => {
    const res = await api(gw.url, PATH, { token: OWNER });
    expect(res.status).toBe(200);
    expect(res.body.data.invoices).toEqual([
      {
        id: "inv-0002",
        period: "2025-02",
        amount: 7.47,
        currency: "USD",
        status: "past_due",
        issued_at: "2025-02-01T00:00:00.000Z",
        due_at: "2025-02-01T00:00:00.000Z",
        paid_at: null,
        pdf_url: `${BASE_URL}/v1/billing/invoices/inv-0002/pdf`,
        lines: [
          { description: "Compute, small", quantity: 120, unit: "hour", amount: 7.2 },
          { description: "Storage", quantity: 2.15, unit: "GB-month", amount: 0.27 },
        ],
      },
      expect.objectContaining({ id: "inv-0001", period: "2025-01", status: "paid", paid_at: "2025-02-01T00:00:05.000Z" }),
    ]);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 2, total_pages: 1 });
    expect(stubs.state.seen.get("listInvoices")!.at(-1)).toMatchObject({ organizationId: "org-inv" });
  });

  it("is paginated like every list", async () => {
    const second = await api(gw.url, `${PATH}?per_page=1&page=2`, { token: OWNER });
    expect(second.body.data.invoices.map((i: { id: string }) => i.id)).toEqual(["inv-0001"]);
    expect(second.body.meta).toMatchObject({ page: 2, per_page: 1, total: 2, total_pages: 2 });
    expect((await api(gw.url, `${PATH}?page=0`, { token: OWNER })).status).toBe(422);
  });

  it("another organization sees only its own", async () => {
    const res = await api(gw.url, PATH, { token: OTHER });
    expect(res.body.data.invoices.map((i: { id: string }) => i.id)).toEqual(["inv-0003"]);
  });
});

describe("GET /v1/billing/invoices/:id/pdf", () => {
  it("pdf_url serves the PDF byte for byte, as an attachment", async () => {
    const listed = await api(gw.url, PATH, { token: OWNER });
    const paid = listed.body.data.invoices.find((i: { id: string }) => i.id === "inv-0001");
    const res = await api(gw.url, pdfPath(paid.pdf_url), { token: OWNER });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/pdf");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="invoice-2025-01-inv-0001.pdf"');
    expect(res.headers.get("content-length")).toBe(String(paidPdf.length));
    expect(res.bytes.equals(paidPdf)).toBe(true);
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(stubs.state.seen.get("getInvoicePdf")!.at(-1)).toMatchObject({ organizationId: "org-inv", id: "inv-0001" });
  });

  it("a file name that would break the header is reduced to plain characters", async () => {
    const pdf = seed("org-inv", "inv-odd", "2024-12", "2025-01-01T00:00:01Z", 'facture "déc"\r\n.pdf');
    const res = await api(gw.url, `${PATH}/inv-odd/pdf`, { token: OWNER });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="facture__d_c___.pdf"');
    expect(res.bytes.equals(pdf)).toBe(true);
  });

  it("another organization's invoice, or an unknown id, is a JSON 404", async () => {
    for (const path of [`${PATH}/inv-0003/pdf`, `${PATH}/inv-nope/pdf`]) {
      const res = await api(gw.url, path, { token: OWNER });
      expect(res.status, path).toBe(404);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(res.body.error.code).toBe("resource_not_found");
    }
  });
});

describe("permissions", () => {
  it("billing:read is enough for both routes (an admin's)", async () => {
    expect((await api(gw.url, PATH, { token: ADMIN })).status).toBe(200);
    expect((await api(gw.url, `${PATH}/inv-0001/pdf`, { token: ADMIN })).status).toBe(200);
  });

  it("without billing:read both are 403, and billing is not asked", async () => {
    const before = [stubs.state.seen.get("listInvoices")!.length, stubs.state.seen.get("getInvoicePdf")!.length];
    for (const path of [PATH, `${PATH}/inv-0001/pdf`]) {
      const res = await api(gw.url, path, { token: NOBODY });
      expect(res.status, path).toBe(403);
      expect(res.body.error).toMatchObject({
        code: "insufficient_permissions",
        message: "this action requires the billing:read permission",
      });
    }
    expect([stubs.state.seen.get("listInvoices")!.length, stubs.state.seen.get("getInvoicePdf")!.length]).toEqual(before);
    expect((await api(gw.url, `${PATH}/inv-0001/pdf`)).status).toBe(401);
  });
});

describe("the OpenAPI document", () => {
  it("describes the list of Invoice records and the application/pdf download", async () => {
    const doc = (await api(gw.url, "/v1/openapi.json")).body;
    const list = doc.paths["/v1/billing/invoices"].get;
    expect(list["x-permission"]).toBe("billing:read");
    expect(list.responses["200"].content["application/json"].schema.properties.data.properties.invoices.items).toEqual({
      $ref: "#/components/schemas/Invoice",
    });
    expect(doc.components.schemas.Invoice.properties.pdf_url).toMatchObject({ type: "string", format: "uri" });
    const pdf = doc.paths["/v1/billing/invoices/{id}/pdf"].get;
    expect(pdf["x-permission"]).toBe("billing:read");
    expect(pdf.responses["200"].content).toEqual({
      "application/pdf": { schema: { type: "string", contentMediaType: "application/pdf" } },
    });
    expect(pdf.responses["200"].headers).toHaveProperty("Content-Disposition");
    expect(pdf.responses).toHaveProperty("404");
  });
});
