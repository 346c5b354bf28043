import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createInternalClient, createLogger, startServer, type RunningServer } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chargeDueInvoices } from "../src/invoices/charge.ts";
import { closeEndedPeriods } from "../src/invoices/close.ts";
import { routes } from "../src/routes.ts";
import { createTestContext, statusEvent as ev, violationsOf } from "./helpers.ts";
import { checkPdf } from "./pdf-check.ts";

const SECRET = "billing-server-test-secret";

let env: Awaited<ReturnType<typeof createTestContext>>;
let server: RunningServer;

beforeAll(async () => {
  env = await createTestContext("2025-03-20T12:00:00Z");
  server = await startServer({
    port: 0,
    routes: routes(env.ctx),
    internalSecret: SECRET,
    log: createLogger("billing-test"),
  });
});

afterAll(async () => {
  await server?.close();
  await env?.close();
});

describe("billing over HTTP/2", () => {
  it("records events and reports usage for an internal caller", async () => {
    const client = createInternalClient(BillingService, server.url, { secret: SECRET, caller: "databases" });
    const events = [
      ev("org-wire", "db-a", "small", "running", "2025-03-20T00:00:00Z"),
      ev("org-wire", "db-a", "small", "stopped", "2025-03-20T07:30:00Z"),
    ];
    expect((await client.recordStatusEvents({ events })).recorded).toBe(2);
    expect((await client.recordStatusEvents({ events })).recorded).toBe(0);
    const usage = await client.getUsage({ organizationId: "org-wire" });
    expect(usage.computeHours).toMatchObject({ quantity: 7.5, amount: 0.45 });
    expect(usage.total).toBe(0.45);
    expect(usage.currency).toBe("USD");
  });

  it("adds, lists and switches payment methods and reports standing for an internal caller", async () => {
    const client = createInternalClient(BillingService, server.url, { secret: SECRET, caller: "gateway" });
    const organizationId = "org-wire-pm";
    expect((await client.getStanding({ organizationId })).hasDefaultPaymentMethod).toBe(false);
    const visa = (await client.addPaymentMethod({ organizationId, type: "card", token: "tok_visa" })).paymentMethod!;
    const amex = (await client.addPaymentMethod({ organizationId, type: "card", token: "tok_amex" })).paymentMethod!;
    expect([visa.isDefault, amex.isDefault]).toEqual([true, false]);
    const switched = await client.updatePaymentMethod({ organizationId, id: amex.id, isDefault: true });
    expect(switched.paymentMethod).toMatchObject({ id: amex.id, brand: "amex", last4: "8431", isDefault: true });
    const listed = await client.listPaymentMethods({ organizationId });
    expect(listed.paymentMethods.map((m) => [m.id, m.isDefault])).toEqual([
      [visa.id, false],
      [amex.id, true],
    ]);
    expect((await client.getStanding({ organizationId })).hasDefaultPaymentMethod).toBe(true);
    const declined = await client.addPaymentMethod({ organizationId, type: "card", token: "tok_nope" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(declined?.code).toBe(Code.InvalidArgument);
    expect(violationsOf(declined)).toEqual([
      { field: "token", message: "was declined by the payment processor: it is not a valid card token" },
    ]);
  });

  it("lists invoices and carries an invoice's PDF bytes intact", async () => {
    const client = createInternalClient(BillingService, server.url, { secret: SECRET, caller: "gateway" });
    const organizationId = "org-wire-inv";
    await client.addPaymentMethod({ organizationId, type: "card", token: "tok_visa" });
    await client.recordStatusEvents({
      events: [
        ev(organizationId, "db-a", "large", "running", "2025-02-03T00:00:00Z"),
        ev(organizationId, "db-a", "large", "stopped", "2025-02-03T10:00:00Z"),
      ],
    });
    await closeEndedPeriods(env.ctx);
    await chargeDueInvoices(env.ctx);

    const { invoices } = await client.listInvoices({ organizationId });
    expect(invoices.map((i) => [i.period, i.amount, i.status])).toEqual([["2025-02", 2.4, "paid"]]);
    const invoice = invoices[0]!;
    const { pdf, filename } = await client.getInvoicePdf({ organizationId, id: invoice.id });
    expect(filename).toBe(`invoice-2025-02-${invoice.id}.pdf`);
    // The high bytes of the binary marker line (pdfkit's) survive the trip.
    expect([...pdf.subarray(9, 15)]).toEqual([0x25, 0xff, 0xff, 0xff, 0xff, 0x0a]);
    expect((await checkPdf(pdf)).shown).toContain("USD 2.40");
    expect((await client.getStanding({ organizationId })).hasPastDueInvoice).toBe(false);
  });

  it("refuses a call without the internal credential, or with one signed by another secret", async () => {
    const bare = createClient(BillingService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const forged = createInternalClient(BillingService, server.url, { secret: "not-the-secret", caller: "databases" });
    for (const client of [bare, forged]) {
      const err = await client.getUsage({ organizationId: "org-wire" }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.Unauthenticated);
    }
    const stored = await env.ctx.pool.query("SELECT count(*)::int AS n FROM status_events WHERE organization_id = 'org-x'");
    const write = await bare.recordStatusEvents({ events: [ev("org-x", "db-x", "micro", "running", "2025-03-01T00:00:00Z")] }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(write?.code).toBe(Code.Unauthenticated);
    const after = await env.ctx.pool.query("SELECT count(*)::int AS n FROM status_events WHERE organization_id = 'org-x'");
    expect(after.rows[0].n).toBe(stored.rows[0].n);
  });
});
