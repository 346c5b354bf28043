import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService } from "@dbaas/proto/billing";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeEndedPeriods } from "../src/invoices/close.ts";
import { routes } from "../src/routes.ts";
import { startFakeIdentity, type FakeIdentity } from "./fake-identity.ts";
import { createTestContext, statusEvent as ev } from "./helpers.ts";
import { checkPdf } from "./pdf-check.ts";

/** GetInvoicePdf asks identity for the organization's name (the "Customer" line) and serves the invoice without it when it cannot. */
describe("GetInvoicePdf and the organization's name", () => {
  let env: Awaited<ReturnType<typeof createTestContext>>;
  let identity: FakeIdentity;
  let client: Client<typeof BillingService>;
  const log = captureLog();
  let seq = 0;

  beforeAll(async () => {
    env = await createTestContext("2025-02-10T00:00:00Z", { log });
    identity = await startFakeIdentity();
    env.ctx.identity = identity.client;
    client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
  });

  afterAll(async () => {
    await identity?.close();
    await env?.close();
  });

  /** An organization with a February invoice, and the rows of that invoice's PDF as served. */
  async function invoiceRows(name?: string): Promise<{ org: string; rows: string[][] }> {
    const org = `org-pdfname${++seq}`;
    if (name !== undefined) identity.names.set(org, name);
    env.clock.set("2025-02-10T00:00:00Z");
    await client.recordStatusEvents({
      events: [ev(org, "db-a", "small", "running", "2025-02-03T00:00:00Z"), ev(org, "db-a", "small", "stopped", "2025-02-03T10:00:00Z")],
    });
    env.clock.set("2025-03-01T00:10:00Z");
    await closeEndedPeriods(env.ctx);
    const [invoice] = (await client.listInvoices({ organizationId: org })).invoices;
    const { pdf } = await client.getInvoicePdf({ organizationId: org, id: invoice!.id });
    return { org, rows: (await checkPdf(pdf)).rows };
  }

  it("names the customer as identity has it, in its own script, beside the organization id", async () => {
    const { org, rows } = await invoiceRows("Ακμή Α.Ε. – Москва");
    expect(rows).toContainEqual(["Customer", "Ακμή Α.Ε. – Москва"]);
    expect(rows).toContainEqual(["Organization", org]);
  });

  it("serves the invoice with the id only when identity fails, and says so in the log", async () => {
    identity.failing = true;
    log.lines.length = 0;
    try {
      const { org, rows } = await invoiceRows("Never Shown");
      expect(rows.some((r) => r[0] === "Customer")).toBe(false);
      expect(rows).toContainEqual(["Organization", org]);
      expect(log.lines.find((l) => l.msg.startsWith("could not ask identity for the organization's name"))).toMatchObject({
        level: "warn",
        fields: { organization_id: org },
      });
    } finally {
      identity.failing = false;
    }
  });

  it("serves it with the id only, quietly, for an organization identity no longer knows", async () => {
    const org = `org-pdfname${seq + 1}`;
    identity.unknown.add(org);
    log.lines.length = 0;
    const { rows } = await invoiceRows();
    expect(rows.some((r) => r[0] === "Customer")).toBe(false);
    expect(rows).toContainEqual(["Organization", org]);
    expect(log.lines.filter((l) => l.level !== "info")).toEqual([]);
  });
});
