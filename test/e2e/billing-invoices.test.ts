/**
 * Invoices end to end, against the real stack (billing with the local test
 * processor, its invoice closer every half second): usage in a month that has
 * ended is recorded at billing directly, as the databases outbox would have;
 * the closer issues the month's invoice and charges the default card. A good
 * card pays it and its PDF downloads from pdf_url; a card whose charges fail
 * leaves it past due until another card becomes the default.
 */
import type { Client } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createInternalClient, operatorSecret } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { conformance, createApi } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

let meta: TestDatabase;
let stack: Stack;
let billing: Client<typeof BillingService>;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_invoices");
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1", env: { INVOICE_CLOSE_INTERVAL_MS: "500" } });
  // What a support tool next to the stack does: the secret from the data directory, billing on its port.
  billing = createInternalClient(BillingService, `http://127.0.0.1:${Number(stack.env.PORT) + 3}`, {
    secret: operatorSecret({ ...process.env, DBAAS_DATA_DIR: stack.dataDir }),
    caller: "support",
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

const PATH = "/v1/billing/invoices";
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HOUR = 3_600_000;

interface Invoice {
  id: string;
  period: string;
  amount: number;
  currency: string;
  status: string;
  issued_at: string;
  due_at: string;
  paid_at: string | null;
  pdf_url: string;
  lines: Array<{ description: string; quantity: number; unit: string; amount: number }>;
}

/** The calendar month (UTC) before the current one: it has ended, so it is billed. */
const now = new Date();
const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
const PERIOD = lastMonth.toISOString().slice(0, 7);
const inLastMonth = (hours: number) => timestampFromDate(new Date(lastMonth.getTime() + hours * HOUR));

/**
 * A small database running 100 hours and a micro one 50.5 hours, all within
 * last month: 100 × 0.06 + 50.5 × 0.02 = 6.00 + 1.01 USD.
 */
async function recordLastMonthsUsage(organizationId: string): Promise<void> {
  const run = (db: string, tier: string, from: number, to: number) => [
    { eventId: `${db}-up`, organizationId, databaseId: db, tier, status: "running", occurredAt: inLastMonth(from) },
    { eventId: `${db}-down`, organizationId, databaseId: db, tier, status: "stopped", occurredAt: inLastMonth(to) },
  ];
  const res = await billing.recordStatusEvents({
    events: [...run(`db-inv-${organizationId}-1`, "small", 48, 148), ...run(`db-inv-${organizationId}-2`, "micro", 200, 250.5)],
  });
  expect(res.recorded).toBe(4);
}

const EXPECTED_LINES = [
  { description: "Compute, micro", quantity: 50.5, unit: "hour", amount: 1.01 },
  { description: "Compute, small", quantity: 100, unit: "hour", amount: 6 },
];

async function invoices(api: ReturnType<typeof createApi>): Promise<Invoice[]> {
  const res = await api.get(PATH);
  expect(res.status).toBe(200);
  return res.body.data.invoices;
}

/** Waits for last month's invoice to be in `status`, asking once a second: a free organization has 60 requests a minute. */
async function invoiceIn(api: ReturnType<typeof createApi>, status: string): Promise<Invoice> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const found = (await invoices(api)).find((i) => i.period === PERIOD && i.status === status);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${status} invoice for ${PERIOD} after 30 s`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

async function download(url: string, token: string) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString("latin1");
  const path = url.slice(stack.baseUrl.length);
  const isJson = res.headers.get("content-type")?.startsWith("application/json") ?? false;
  (await conformance(stack.baseUrl)).check({
    method: "GET",
    path,
    status: res.status,
    headers: res.headers,
    text,
    body: isJson ? JSON.parse(text) : text,
  });
  return { status: res.status, headers: res.headers, bytes, text };
}

describe("invoices, end to end", () => {
  let payer: ReturnType<typeof createApi>;
  let payerToken: string;
  let paid: Invoice;

  it("an organization without usage has no invoices", async () => {
    payer = createApi(stack.baseUrl);
    payerToken = (await payer.signup("inv-payer")).access_token;
    const res = await payer.get(PATH);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ invoices: [] });
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 0, total_pages: 0 });
  });

  it("last month's usage is invoiced once the closer runs, and charged to the card: paid", async () => {
    await payer.addPaymentMethod("tok_visa");
    const org = (await payer.get("/v1/organization")).body.data.id as string;
    await recordLastMonthsUsage(org);

    paid = await invoiceIn(payer, "paid");
    expect(paid).toEqual({
      id: expect.stringMatching(/^inv-/),
      period: PERIOD,
      amount: 7.01,
      currency: "USD",
      status: "paid",
      issued_at: expect.stringMatching(ISO),
      due_at: paid.issued_at,
      paid_at: expect.stringMatching(ISO),
      pdf_url: `${stack.baseUrl}/v1/billing/invoices/${paid.id}/pdf`,
      lines: expect.any(Array),
    });
    expect([...paid.lines].sort((a, b) => a.description.localeCompare(b.description))).toEqual(EXPECTED_LINES);
    expect(Date.parse(paid.paid_at!)).toBeGreaterThanOrEqual(Date.parse(paid.issued_at));
    expect(Date.parse(paid.issued_at)).toBeGreaterThanOrEqual(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  });

  it("the month is invoiced once, however often the closer runs", async () => {
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await invoices(payer)).filter((i) => i.period === PERIOD)).toEqual([paid]);
  });

  it("pdf_url downloads a PDF with the same credential", async () => {
    const res = await download(paid.pdf_url, payerToken);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/pdf");
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="[^"]+\.pdf"$/);
    expect(Number(res.headers.get("content-length"))).toBe(res.bytes.length);
    expect(res.text.startsWith("%PDF-")).toBe(true);
    expect(res.text.slice(-1024)).toContain("%%EOF");
  });

  it("a charge that fails leaves the invoice past due; a good card made the default pays it", async () => {
    const debtor = createApi(stack.baseUrl);
    const debtorToken = (await debtor.signup("inv-debtor")).access_token as string;
    const failing = await debtor.addPaymentMethod("tok_chargeCustomerFail");
    expect(failing.default).toBe(true);
    await recordLastMonthsUsage((await debtor.get("/v1/organization")).body.data.id);

    const pastDue = await invoiceIn(debtor, "past_due");
    expect(pastDue).toMatchObject({ period: PERIOD, amount: 7.01, currency: "USD", paid_at: null });

    // Neither organization reaches the other's invoice.
    expect((await invoices(debtor)).map((i) => i.id)).toEqual([pastDue.id]);
    for (const [url, token] of [
      [paid.pdf_url, debtorToken],
      [pastDue.pdf_url, payerToken],
    ] as const) {
      const res = await download(url, token);
      expect(res.status).toBe(404);
      expect(JSON.parse(res.text).error.code).toBe("resource_not_found");
    }

    // Adding a card retries the charge on the default, which still fails.
    const visa = await debtor.addPaymentMethod("tok_visa");
    expect(visa.default).toBe(false);
    expect((await invoices(debtor)).find((i) => i.id === pastDue.id)?.status).toBe("past_due");

    const patched = await debtor.patch(`/v1/billing/payment-methods/${visa.id}`, { default: true });
    expect(patched.status).toBe(200);
    const settled = await invoiceIn(debtor, "paid");
    expect(settled).toMatchObject({ id: pastDue.id, amount: 7.01, paid_at: expect.stringMatching(ISO) });
    expect(Date.parse(settled.paid_at!)).toBeGreaterThan(Date.parse(settled.issued_at));
  });
});
