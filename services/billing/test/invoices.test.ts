import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { createPool, migrate } from "@dbaas/kit";
import { BillingService, type Invoice, type StatusEvent } from "@dbaas/proto/billing";
import { captureLog } from "@dbaas/test/support/log";
import { createTestDatabase } from "@dbaas/test/support/pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { startInvoicing } from "../src/background.ts";
import { MIGRATIONS_DIR } from "../src/db/schema.ts";
import { chargeDueInvoices } from "../src/invoices/charge.ts";
import { closeEndedPeriods } from "../src/invoices/close.ts";
import { ProcessorError, type ChargeRequest, type ChargeResult } from "../src/processor/processor.ts";
import { createTestProcessor } from "../src/processor/test-processor.ts";
import { routes } from "../src/routes.ts";
import { createTestContext, type ManualClock, rejection, SCHEMA, statusEvent as ev, violationsOf } from "./helpers.ts";
import { checkPdf } from "./pdf-check.ts";

let env: Awaited<ReturnType<typeof createTestContext>>;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let ledger: ReturnType<typeof createTestProcessor>["charges"];
const log = captureLog();
let orgSeq = 0;
const newOrg = () => `org-inv${++orgSeq}`;

/** Every charge request the service made, and a way to make the next ones go wrong. */
const sent: ChargeRequest[] = [];
let interfere: ((req: ChargeRequest, charge: () => Promise<ChargeResult>) => Promise<ChargeResult>) | undefined;

beforeAll(async () => {
  env = await createTestContext("2025-04-01T00:00:00Z", {
    log,
    processor: (c) => {
      const test = createTestProcessor(c);
      ledger = test.charges;
      return {
        ...test,
        charge: (req) => {
          sent.push(req);
          return interfere ? interfere(req, () => test.charge(req)) : test.charge(req);
        },
      };
    },
  });
  clock = env.clock;
  client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
});

afterAll(async () => {
  await env.close();
});

beforeEach(() => {
  interfere = undefined;
  log.lines.length = 0;
});

/** One run of the invoicing loop, as it runs at start-up and on each interval. */
async function run(): Promise<void> {
  await closeEndedPeriods(env.ctx);
  await chargeDueInvoices(env.ctx);
}

async function record(...events: StatusEvent[]): Promise<void> {
  await client.recordStatusEvents({ events });
}

async function invoices(organizationId: string): Promise<Invoice[]> {
  return (await client.listInvoices({ organizationId })).invoices;
}

async function only(organizationId: string): Promise<Invoice> {
  const list = await invoices(organizationId);
  expect(list).toHaveLength(1);
  return list[0]!;
}

async function addCard(organizationId: string, token: string) {
  return (await client.addPaymentMethod({ organizationId, type: "card", token })).paymentMethod!;
}

async function attempts(invoiceId: string) {
  const { rows } = await env.ctx.pool.query<{
    attempt: number;
    idempotency_key: string;
    status: string;
    payment_method_id: string;
    amount_cents: string;
    charge_ref: string | null;
  }>(
    "SELECT attempt, idempotency_key, status, payment_method_id, amount_cents, charge_ref FROM charge_attempts WHERE invoice_id = $1 ORDER BY attempt",
    [invoiceId],
  );
  return rows;
}

const iso = (ts: Invoice["issuedAt"]) => (ts ? timestampDate(ts).toISOString() : undefined);

/** Some March usage: 7.5 h small = 0.45. */
async function marchUsage(org: string): Promise<void> {
  await record(ev(org, "db-m", "small", "running", "2025-03-03T00:00:00Z"), ev(org, "db-m", "small", "stopped", "2025-03-03T07:30:00Z"));
}

describe("closing months", () => {
  it("closes a month once it has ended, once, with a line per tier rounded to cents", async () => {
    const org = newOrg();
    clock.set("2025-03-01T00:00:00Z");
    await addCard(org, "tok_visa");
    await record(
      ev(org, "db-a", "small", "running", "2025-03-01T00:00:00Z"),
      ev(org, "db-a", "small", "stopped", "2025-03-01T07:30:00Z"),
      ev(org, "db-b", "micro", "running", "2025-03-10T00:00:00Z"),
      ev(org, "db-b", "micro", "stopped", "2025-03-10T01:15:00Z"),
      ev(org, "db-c", "small", "running", "2025-03-20T10:00:00Z"),
      ev(org, "db-c", "small", "deleted", "2025-03-20T12:00:00Z"),
    );

    clock.set("2025-03-31T23:59:59Z");
    await run();
    expect(await invoices(org)).toEqual([]);

    clock.set("2025-04-01T00:00:00Z");
    await run();
    const invoice = await only(org);
    expect(invoice.id).toMatch(/^inv-[a-z0-9]{16}$/);
    expect(invoice).toMatchObject({ organizationId: org, period: "2025-03", amount: 0.6, currency: "USD", status: "paid" });
    // Micro 1.25 h = 0.025, half up to 0.03; small 7.5 h + 2 h = 0.57.
    expect(invoice.lines.map((l) => ({ description: l.description, quantity: l.quantity, unit: l.unit, amount: l.amount }))).toEqual([
      { description: "Compute, micro", quantity: 1.25, unit: "hour", amount: 0.03 },
      { description: "Compute, small", quantity: 9.5, unit: "hour", amount: 0.57 },
    ]);
    expect([iso(invoice.issuedAt), iso(invoice.dueAt), iso(invoice.paidAt)]).toEqual(Array(3).fill("2025-04-01T00:00:00.000Z"));

    // Later runs, that month or the next without usage, add nothing.
    await run();
    clock.set("2025-05-02T00:00:00Z");
    await run();
    expect(await invoices(org)).toEqual([invoice]);
    expect(await attempts(invoice.id)).toHaveLength(1);
  });

  it("bills a database running through months without events, and skips a month without usage", async () => {
    const org = newOrg();
    await record(
      ev(org, "db-a", "micro", "running", "2025-01-15T00:00:00Z"),
      ev(org, "db-a", "micro", "stopped", "2025-03-10T00:00:00Z"),
      ev(org, "db-a", "micro", "running", "2025-05-01T00:00:00Z"),
      ev(org, "db-a", "micro", "stopped", "2025-05-01T10:00:00Z"),
    );
    clock.set("2025-06-01T00:00:00Z");
    await run();
    const list = await invoices(org);
    // Newest first: 10 h in May; none in April; 9 days in March; all of February; 17 days in January.
    expect(list.map((i) => [i.period, i.amount, i.lines.map((l) => l.quantity)])).toEqual([
      ["2025-05", 0.2, [10]],
      ["2025-03", 4.32, [216]],
      ["2025-02", 13.44, [672]],
      ["2025-01", 8.16, [408]],
    ]);
  });

  it("issues no invoice for a month that rounds to 0.00, and rounds each line once", async () => {
    const tiny = newOrg();
    const twoHalfCents = newOrg();
    // 891 s of micro is 0.00495: nothing at cents (0.0050 at the meter's 4 decimals would have made it a cent).
    await record(
      ev(tiny, "db-a", "micro", "running", "2025-03-05T00:00:00Z"),
      ev(tiny, "db-a", "micro", "stopped", "2025-03-05T00:14:51Z"),
    );
    // 15 min of micro and 5 min of small: 0.005 each, a cent each.
    await record(
      ev(twoHalfCents, "db-a", "micro", "running", "2025-03-05T00:00:00Z"),
      ev(twoHalfCents, "db-a", "micro", "stopped", "2025-03-05T00:15:00Z"),
      ev(twoHalfCents, "db-b", "small", "running", "2025-03-05T00:00:00Z"),
      ev(twoHalfCents, "db-b", "small", "stopped", "2025-03-05T00:05:00Z"),
    );
    clock.set("2025-04-01T00:00:00Z");
    await run();
    expect(await invoices(tiny)).toEqual([]);
    const invoice = await only(twoHalfCents);
    expect(invoice.lines.map((l) => l.amount)).toEqual([0.01, 0.01]);
    expect(invoice.amount).toBe(0.02);
    // The month is closed all the same: not looked at again.
    const schedule = await env.ctx.pool.query(
      "SELECT to_char(next_period, 'YYYY-MM') AS p FROM invoice_schedule WHERE organization_id = $1",
      [tiny],
    );
    expect(schedule.rows).toEqual([{ p: "2025-04" }]);
  });

  it("issues one invoice per organization and month, charged once, however many closers run at once", async () => {
    const orgs = Array.from({ length: 6 }, newOrg);
    clock.set("2025-03-15T00:00:00Z");
    for (const org of orgs) {
      await addCard(org, "tok_visa");
      await marchUsage(org);
    }
    clock.set("2025-04-01T00:00:00Z");
    await Promise.all(Array.from({ length: 8 }, run));
    for (const org of orgs) {
      const invoice = await only(org);
      expect(invoice).toMatchObject({ period: "2025-03", amount: 0.45, status: "paid" });
      expect(await attempts(invoice.id)).toEqual([expect.objectContaining({ attempt: 1, status: "succeeded" })]);
      expect([...ledger.values()].filter((c) => c.request.invoiceId === invoice.id)).toHaveLength(1);
    }
  });

  it("invoices late usage of a month closed without one; a month invoiced stands, and the difference is logged", async () => {
    const org = newOrg();
    await addCard(org, "tok_visa");
    await marchUsage(org);
    clock.set("2025-04-01T00:00:00Z");
    await run();
    const march = await only(org);

    // Delivered late (an outbox backlog): February, closed with nothing, and more of March.
    await record(ev(org, "db-f", "small", "running", "2025-02-10T00:00:00Z"), ev(org, "db-f", "small", "stopped", "2025-02-10T02:00:00Z"));
    await record(ev(org, "db-z", "micro", "running", "2025-03-05T00:00:00Z"), ev(org, "db-z", "micro", "stopped", "2025-03-05T10:00:00Z"));
    clock.set("2025-04-01T01:00:00Z");
    await run();
    const list = await invoices(org);
    expect(list.map((i) => [i.period, i.amount, i.status])).toEqual([
      ["2025-03", 0.45, "paid"],
      ["2025-02", 0.12, "paid"],
    ]);
    expect(list[0]).toEqual(march);
    expect(log.lines.find((l) => l.msg === "usage changed after the month was invoiced")?.fields).toMatchObject({
      organization_id: org,
      period: "2025-03",
      invoiced_cents: 45,
      usage_cents: 65,
    });
  });

  it("schedules the organizations metered before invoices existed", async () => {
    const db = await createTestDatabase("billing_upgrade");
    const pool = createPool(db.url, SCHEMA);
    const before = mkdtempSync(join(tmpdir(), "billing-migrations-"));
    try {
      const dir = fileURLToPath(new URL("../src/db/migrations", import.meta.url));
      for (const file of ["0001_init.sql", "0002_payment_methods.sql"]) cpSync(join(dir, file), join(before, file));
      await migrate(pool, SCHEMA, before);
      await pool.query(
        `INSERT INTO status_events (event_id, organization_id, database_id, tier, status, occurred_at) VALUES
           ('e1', 'org-old', 'db-1', 'micro', 'running', '2024-11-30T23:30:00Z'),
           ('e2', 'org-old', 'db-1', 'micro', 'stopped', '2025-01-02T00:00:00Z'),
           ('e3', 'org-new', 'db-2', 'micro', 'running', '2025-02-01T00:00:00Z')`,
      );
      expect(await migrate(pool, SCHEMA, MIGRATIONS_DIR)).toContain("0003_invoices.sql");
      const { rows } = await pool.query("SELECT organization_id, to_char(next_period, 'YYYY-MM') AS p FROM invoice_schedule ORDER BY 1");
      expect(rows).toEqual([
        { organization_id: "org-new", p: "2025-02" },
        { organization_id: "org-old", p: "2024-11" },
      ]);
    } finally {
      rmSync(before, { recursive: true, force: true });
      await pool.end();
      await db.drop();
    }
  });
});

describe("charging invoices", () => {
  it("charges the default payment method under a key naming the invoice and attempt", async () => {
    const org = newOrg();
    const card = await addCard(org, "tok_mastercard");
    await marchUsage(org);
    clock.set("2025-04-01T00:00:00Z");
    const before = sent.length;
    await run();
    const invoice = await only(org);
    expect(invoice.status).toBe("paid");
    const { rows } = await env.ctx.pool.query("SELECT processor_ref FROM payment_methods WHERE id = $1", [card.id]);
    expect(sent.slice(before)).toEqual([
      {
        customerRef: `cus_test_${org}`,
        paymentMethodRef: rows[0].processor_ref,
        amountCents: 45,
        currency: "USD",
        idempotencyKey: `dbaas-invoice-${invoice.id}-1`,
        invoiceId: invoice.id,
      },
    ]);
    const ref = ledger.get(`dbaas-invoice-${invoice.id}-1`)!.result;
    expect(await attempts(invoice.id)).toEqual([
      {
        attempt: 1,
        idempotency_key: `dbaas-invoice-${invoice.id}-1`,
        status: "succeeded",
        payment_method_id: card.id,
        amount_cents: "45",
        charge_ref: ref.paid ? ref.ref : "not paid",
      },
    ]);
    expect(log.lines.map((l) => l.msg)).toContain("invoice paid");
  });

  it("makes a declined invoice past due, retries it once a day, and charges a new default at once", async () => {
    const org = newOrg();
    const failing = await addCard(org, "tok_chargeCustomerFail");
    await marchUsage(org);
    clock.set("2025-04-01T00:00:00Z");
    await run();
    const invoice = await only(org);
    expect(invoice.status).toBe("past_due");
    expect(invoice.paidAt).toBeUndefined();
    expect(await client.getStanding({ organizationId: org })).toMatchObject({ hasDefaultPaymentMethod: true, hasPastDueInvoice: true });
    expect(log.lines.find((l) => l.msg === "invoice charge declined; invoice past due")?.fields).toMatchObject({
      organization_id: org,
      invoice_id: invoice.id,
      reason: "the card was declined",
    });

    clock.set("2025-04-01T23:59:00Z");
    await run();
    expect(await attempts(invoice.id)).toHaveLength(1);
    clock.set("2025-04-02T00:00:00Z");
    await run();
    expect((await attempts(invoice.id)).map((a) => [a.idempotency_key, a.status, a.payment_method_id])).toEqual([
      [`dbaas-invoice-${invoice.id}-1`, "declined", failing.id],
      [`dbaas-invoice-${invoice.id}-2`, "declined", failing.id],
    ]);

    // Another card that is not the default changes nothing about the charge.
    clock.set("2025-04-02T10:00:00Z");
    const visa = await addCard(org, "tok_visa");
    expect(await attempts(invoice.id)).toHaveLength(2);
    await client.updatePaymentMethod({ organizationId: org, id: visa.id, isDefault: true });
    const paid = await only(org);
    expect(paid.status).toBe("paid");
    expect(iso(paid.paidAt)).toBe("2025-04-02T10:00:00.000Z");
    expect((await attempts(invoice.id)).map((a) => [a.attempt, a.status, a.payment_method_id])).toEqual([
      [1, "declined", failing.id],
      [2, "declined", failing.id],
      [3, "succeeded", visa.id],
    ]);
    expect((await client.getStanding({ organizationId: org })).hasPastDueInvoice).toBe(false);
  });

  it("makes an invoice without a payment method past due; the first card added pays it", async () => {
    const org = newOrg();
    await marchUsage(org);
    clock.set("2025-04-01T00:00:00Z");
    await run();
    const invoice = await only(org);
    expect(invoice.status).toBe("past_due");
    expect(await attempts(invoice.id)).toEqual([]);
    expect(await client.getStanding({ organizationId: org })).toMatchObject({ hasDefaultPaymentMethod: false, hasPastDueInvoice: true });
    expect(log.lines.find((l) => l.msg === "invoice past due: no default payment method")?.fields).toMatchObject({
      invoice_id: invoice.id,
    });

    clock.set("2025-04-03T08:00:00Z");
    await addCard(org, "tok_amex");
    expect(await only(org)).toMatchObject({ status: "paid", paidAt: expect.anything() });
    expect((await client.getStanding({ organizationId: org })).hasPastDueInvoice).toBe(false);
  });

  it("answers AddPaymentMethod whatever becomes of the charge of past-due invoices", async () => {
    const declines = newOrg();
    const unreachable = newOrg();
    for (const org of [declines, unreachable]) await marchUsage(org);
    clock.set("2025-04-01T00:00:00Z");
    await run();

    const added = await addCard(declines, "tok_chargeCustomerFail");
    expect(added.isDefault).toBe(true);
    expect((await only(declines)).status).toBe("past_due");

    interfere = () => Promise.reject(new ProcessorError("test processor unreachable", true));
    expect((await addCard(unreachable, "tok_visa")).isDefault).toBe(true);
    expect((await only(unreachable)).status).toBe("past_due");
    expect(log.lines.find((l) => l.msg === "invoice charge failed at the payment processor")?.fields).toMatchObject({
      organization_id: unreachable,
      retryable: true,
    });
  });

  it("sends a charge whose answer was lost again with the same key, after the lease, and is charged once", async () => {
    const org = newOrg();
    await addCard(org, "tok_visa");
    await marchUsage(org);
    clock.set("2025-04-01T00:00:00Z");
    // The processor charges; the process dies before the answer is stored.
    interfere = async (_req, charge) => {
      await charge();
      throw new Error("process died");
    };
    await run();
    interfere = undefined;
    const invoice = await only(org);
    expect(invoice.status).toBe("open");
    expect(await attempts(invoice.id)).toEqual([expect.objectContaining({ attempt: 1, status: "pending" })]);
    expect((await client.getStanding({ organizationId: org })).hasPastDueInvoice).toBe(false);
    const key = `dbaas-invoice-${invoice.id}-1`;
    expect(ledger.has(key)).toBe(true);

    // Within the lease the charge may still be in flight: nobody sends it.
    const sentFor = () => sent.filter((r) => r.invoiceId === invoice.id);
    clock.set("2025-04-01T00:09:59Z");
    await run();
    expect(sentFor()).toHaveLength(1);

    clock.set("2025-04-01T00:10:00Z");
    await run();
    const resent = sentFor().slice(1);
    expect(resent).toHaveLength(1);
    expect(resent[0]?.idempotencyKey).toBe(key);
    const paid = await only(org);
    expect(paid.status).toBe("paid");
    expect(iso(paid.paidAt)).toBe("2025-04-01T00:10:00.000Z");
    // The processor answered the repeat with its first charge.
    expect([...ledger.values()].filter((c) => c.request.invoiceId === invoice.id)).toHaveLength(1);
    const first = ledger.get(key)!.result;
    expect(await attempts(invoice.id)).toEqual([
      expect.objectContaining({ attempt: 1, status: "succeeded", charge_ref: first.paid && first.ref }),
    ]);
  });

  it("keeps the key while the processor is unreachable, and takes a new one a day after a refused request", async () => {
    const unreachable = newOrg();
    const refused = newOrg();
    for (const org of [unreachable, refused]) {
      await addCard(org, "tok_visa");
      await marchUsage(org);
    }
    clock.set("2025-04-01T00:00:00Z");
    interfere = (req) =>
      Promise.reject(
        req.customerRef === `cus_test_${unreachable}`
          ? new ProcessorError("test processor unreachable", true)
          : new ProcessorError("test processor refused the request", false),
      );
    await run();
    interfere = undefined;
    const lost = await only(unreachable);
    expect(
      log.lines
        .filter((l) => l.msg === "invoice charge failed at the payment processor" && l.fields.invoice_id === lost.id)
        .map((l) => l.fields.retryable),
    ).toEqual([true]);

    // Both are open (the refused one was not charged at all): the lost one is sent again after the
    // lease, the refused one a day later, under a new key.
    expect((await only(refused)).status).toBe("open");
    expect((await attempts(lost.id)).map((a) => a.status)).toEqual(["pending"]);
    const refusedInvoice = await only(refused);
    expect((await attempts(refusedInvoice.id)).map((a) => a.status)).toEqual(["failed"]);

    clock.set("2025-04-01T00:10:00Z");
    await run();
    expect((await attempts(lost.id)).map((a) => [a.attempt, a.status])).toEqual([[1, "succeeded"]]);
    expect(await attempts(refusedInvoice.id)).toHaveLength(1);
    clock.set("2025-04-02T00:00:00Z");
    await run();
    expect((await attempts(refusedInvoice.id)).map((a) => [a.idempotency_key, a.status])).toEqual([
      [`dbaas-invoice-${refusedInvoice.id}-1`, "failed"],
      [`dbaas-invoice-${refusedInvoice.id}-2`, "succeeded"],
    ]);
    expect((await only(unreachable)).status).toBe("paid");
    expect((await only(refused)).status).toBe("paid");
  });
});

describe("ListInvoices and GetInvoicePdf", () => {
  it("list and render only the organization's own invoices", async () => {
    const mine = newOrg();
    const theirs = newOrg();
    await addCard(mine, "tok_visa");
    await record(
      ev(mine, "db-a", "medium", "running", "2025-01-31T22:00:00Z"),
      ev(mine, "db-a", "medium", "stopped", "2025-02-01T03:00:00Z"),
    );
    await marchUsage(theirs);
    clock.set("2025-04-01T00:00:00Z");
    await run();

    const list = await invoices(mine);
    expect(list.map((i) => [i.period, i.amount, i.organizationId])).toEqual([
      ["2025-02", 0.36, mine],
      ["2025-01", 0.24, mine],
    ]);
    const february = list[0]!;
    const other = (await invoices(theirs))[0]!;
    expect(other.organizationId).toBe(theirs);
    expect(await invoices(newOrg())).toEqual([]);

    const { pdf, filename } = await client.getInvoicePdf({ organizationId: mine, id: february.id });
    expect(filename).toBe(`invoice-2025-02-${february.id}.pdf`);
    const { shown } = await checkPdf(pdf);
    expect(shown).toEqual(expect.arrayContaining(["dbaas", february.id, mine, "paid", "Compute, medium", "3", "0.36", "USD 0.36"]));

    for (const [organizationId, id] of [
      [theirs, february.id],
      [mine, other.id],
      [mine, "inv-doesnotexist0000"],
    ] as const) {
      const err = await rejection(client.getInvoicePdf({ organizationId, id }));
      expect(err.code).toBe(Code.NotFound);
      expect(err.rawMessage).toBe("invoice not found");
    }
  });

  it("reject a missing organization or invoice id", async () => {
    expect(violationsOf(await rejection(client.listInvoices({ organizationId: "" })))).toEqual([
      { field: "organization_id", message: "is required" },
    ]);
    expect(violationsOf(await rejection(client.getInvoicePdf({ organizationId: "", id: "" })))).toEqual([
      { field: "organization_id", message: "is required" },
      { field: "id", message: "is required" },
    ]);
  });
});

describe("the invoicing loop", () => {
  it("closes at start-up and on each interval by the context's clock, and stops when aborted", async () => {
    const org = newOrg();
    await addCard(org, "tok_visa");
    await marchUsage(org);
    clock.set("2025-03-31T12:00:00Z");
    const stop = new AbortController();
    const loop = startInvoicing(env.ctx, stop.signal, 20);
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(await invoices(org)).toEqual([]);
      clock.set("2025-04-01T00:00:00Z");
      await vi.waitFor(async () => expect((await only(org)).status).toBe("paid"), { timeout: 5_000, interval: 20 });
    } finally {
      stop.abort();
    }
    await loop;

    // Stopped: a month that ends now is not closed.
    await record(ev(org, "db-n", "small", "running", "2025-04-02T00:00:00Z"), ev(org, "db-n", "small", "stopped", "2025-04-02T01:00:00Z"));
    clock.set("2025-05-01T00:00:00Z");
    await new Promise((r) => setTimeout(r, 100));
    expect(await invoices(org)).toHaveLength(1);
  });
});
