import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService } from "@dbaas/proto/billing";
import { captureLog } from "@dbaas/test/support/log";
import Stripe from "stripe";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { chargeDueInvoices } from "../src/invoices/charge.ts";
import { closeEndedPeriods } from "../src/invoices/close.ts";
import { ProcessorError, type ChargeRequest, type PaymentProcessor } from "../src/processor/processor.ts";
import { createStripeProcessor } from "../src/processor/stripe.ts";
import { routes } from "../src/routes.ts";
import { startFakeStripe, type FakeStripe } from "./fake-stripe.ts";
import { createTestContext, rejection, statusEvent as ev, violationsOf } from "./helpers.ts";

const KEY = "sk_test_contract_51Hx9q2eZvKYlo2C";

let stripe: FakeStripe;
let orgSeq = 0;
const newOrg = () => `org-stripe${++orgSeq}`;

beforeAll(async () => {
  stripe = await startFakeStripe(KEY);
});

afterAll(async () => {
  await stripe?.close();
});

afterEach(() => {
  stripe.requests.length = 0;
});

const processor = (opts: { key?: string; base?: string; timeoutMs?: number } = {}): PaymentProcessor =>
  createStripeProcessor({ secretKey: opts.key ?? KEY, apiBase: opts.base ?? stripe.url, timeoutMs: opts.timeoutMs });

async function processorError(p: Promise<unknown>): Promise<ProcessorError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProcessorError);
  return err as ProcessorError;
}

describe("Stripe adapter", () => {
  it("creates a customer, a payment method from the token, and attaches it, as Stripe's API documents", async () => {
    const p = processor();
    const customer = await p.createCustomer("org-contract");
    const result = await p.attachCard(customer, "tok_visa");

    expect(customer).toMatch(/^cus_fake\d+$/);
    expect(result.accepted).toBe(true);
    if (!result.accepted) return;
    expect(result.card).toEqual({ ref: expect.stringMatching(/^pm_fake\d+$/), brand: "visa", last4: "4242", expMonth: 8, expYear: 2031 });
    expect(stripe.paymentMethods.get(result.card.ref)?.customer).toBe(customer);
    expect(stripe.customers.get(customer)).toEqual({ organization_id: "org-contract" });

    expect(stripe.requests.map((r) => [r.method, r.path, r.form])).toEqual([
      ["POST", "/v1/customers", { "metadata[organization_id]": "org-contract" }],
      ["POST", "/v1/payment_methods", { type: "card", "card[token]": "tok_visa" }],
      ["POST", `/v1/payment_methods/${result.card.ref}/attach`, { customer }],
    ]);
    for (const r of stripe.requests) {
      expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(r.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    }
    // Idempotency keys name what each request acts on, the token only hashed.
    expect(stripe.requests.map((r) => r.headers["idempotency-key"])).toEqual([
      "dbaas-customer-org-contract",
      expect.stringMatching(/^dbaas-pm-[0-9a-f]{64}$/),
      `dbaas-attach-${result.card.ref}-${customer}`,
    ]);
  });

  it("accepts a base URL with a trailing slash", async () => {
    const p = processor({ base: `${stripe.url}/` });
    await p.createCustomer("org-slash");
    expect(stripe.requests.map((r) => r.path)).toEqual(["/v1/customers"]);
  });

  it("maps card errors and unusable tokens to a rejection in its own words", async () => {
    const p = processor();
    const customer = await p.createCustomer("org-declines");
    expect(await p.attachCard(customer, "tok_expired")).toEqual({ accepted: false, reason: "the card has expired" });
    expect(await p.attachCard(customer, "tok_declined")).toEqual({ accepted: false, reason: "the card was declined" });
    expect(await p.attachCard(customer, "tok_nonexistent")).toEqual({ accepted: false, reason: "it is not a valid card token" });

    // A token turned into a payment method before (under another key: more than a day ago, say).
    stripe.failNext(/^\/v1\/payment_methods$/, 400, {
      error: { type: "invalid_request_error", code: "token_already_used", message: "You cannot use a Stripe token more than once" },
    });
    expect(await p.attachCard(customer, "tok_visa_used")).toEqual({ accepted: false, reason: "the token was already used" });
    // Any other card error code is a decline.
    stripe.failNext(/\/attach$/, 402, {
      error: { type: "card_error", code: "insufficient_funds", message: "Your card has insufficient funds." },
    });
    expect(await p.attachCard(customer, "tok_visa_poor")).toEqual({ accepted: false, reason: "the card was declined" });
    // Request errors other than the token's are not the user's fault.
    stripe.failNext(/^\/v1\/payment_methods$/, 400, { error: { type: "invalid_request_error", code: "parameter_missing" } });
    expect((await processorError(p.attachCard(customer, "tok_visa_missing"))).retryable).toBe(false);
  });

  it("reports outages as retryable and its own refused requests as not, naming neither key nor token", async () => {
    const customer = await processor().createCustomer("org-outage");
    const token = "tok_visa_secret_looking_1234";
    const errors: ProcessorError[] = [];

    for (const status of [500, 503, 429, 409]) {
      stripe.failNext(/^\/v1\/payment_methods$/, status);
      const err = await processorError(processor().attachCard(customer, token));
      expect(err.retryable, String(status)).toBe(true);
      expect(err.message).toBe(`stripe POST /payment_methods: HTTP ${status} api_error`);
      errors.push(err);
    }

    const wrongKey = await processorError(processor({ key: "sk_test_wrong_key_0000" }).attachCard(customer, token));
    expect(wrongKey.retryable).toBe(false);
    expect(wrongKey.message).toBe("stripe POST /payment_methods: HTTP 401 invalid_request_error");
    errors.push(wrongKey);

    stripe.failNext(/^\/v1\/customers$/, 400, { error: { type: "invalid_request_error", code: "parameter_unknown" } });
    const refused = await processorError(processor().createCustomer("org-refused"));
    expect(refused).toMatchObject({
      retryable: false,
      message: "stripe POST /customers: HTTP 400 invalid_request_error (parameter_unknown)",
    });

    stripe.failNext(/^\/v1\/customers$/, 200, "<html>not json</html>");
    expect((await processorError(processor().createCustomer("org-html"))).retryable).toBe(false);

    stripe.failNext(/^\/v1\/payment_methods$/, 200, { id: "pm_without_card", object: "payment_method" });
    const shapeless = await processorError(processor().attachCard(customer, "tok_mastercard"));
    expect(shapeless).toMatchObject({ retryable: false, message: "stripe answered with a payment method without its card details" });

    // Nothing listens there.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((r) => closed.close(() => r()));
    const unreachable = await processorError(processor({ base: `http://127.0.0.1:${port}/v1` }).attachCard(customer, token));
    expect(unreachable).toMatchObject({ retryable: true, message: "stripe POST /payment_methods could not be reached" });
    errors.push(unreachable);

    for (const err of errors) {
      expect(err.message).not.toContain(KEY);
      expect(err.message).not.toContain(token);
      expect(err.message).not.toContain("sk_test");
    }
  });

  it("times out a hung processor as retryable", async () => {
    const hangs = await startFakeStripe(KEY);
    try {
      hangs.hang(/./);
      const err = await processorError(
        createStripeProcessor({ secretKey: KEY, apiBase: hangs.url, timeoutMs: 150 }).attachCard("cus_x", "tok_visa"),
      );
      expect(err).toMatchObject({ retryable: true, message: "stripe POST /payment_methods timed out after 150 ms" });
    } finally {
      await hangs.close();
    }
  });

  it("gets Stripe's first answer again when an add is retried after a failed attach", async () => {
    const p = processor();
    const customer = await p.createCustomer("org-retry");
    stripe.failNext(/\/attach$/, 503);
    expect((await processorError(p.attachCard(customer, "tok_visa_retry"))).retryable).toBe(true);
    const pmCount = stripe.paymentMethods.size;
    const retried = await p.attachCard(customer, "tok_visa_retry");
    expect(retried.accepted).toBe(true);
    // No second payment method, no "token already used": the creation was replayed.
    expect(stripe.paymentMethods.size).toBe(pmCount);
    const keys = stripe.requests.filter((r) => r.path === "/v1/payment_methods").map((r) => r.headers["idempotency-key"]);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(keys[1]);
  });
});

describe("Stripe adapter on Stripe's SDK", () => {
  it("sends every request through the official client: its API version and user agent, no telemetry", async () => {
    const p = processor();
    const customer = await p.createCustomer("org-sdk");
    await p.attachCard(customer, "tok_visa_sdk");
    expect(stripe.requests).toHaveLength(3);
    for (const r of stripe.requests) {
      expect(r.headers["stripe-version"]).toBe(Stripe.API_VERSION);
      expect(r.headers["user-agent"]).toMatch(/^Stripe\/v1 NodeBindings\//);
      expect(r.headers["x-stripe-client-telemetry"]).toBeUndefined();
    }
  });

  it("keeps the status of an answer it cannot read: a proxy's 502 page is an outage, its 400 page a refusal", async () => {
    const customer = await processor().createCustomer("org-unreadable");
    stripe.failNext(/^\/v1\/customers$/, 502, "<html>bad gateway</html>");
    expect(await processorError(processor().createCustomer("org-502"))).toMatchObject({
      retryable: true,
      message: "stripe POST /customers: HTTP 502 no error type",
    });
    stripe.failNext(/^\/v1\/payment_methods$/, 400, "<html>bad request</html>");
    expect(await processorError(processor().attachCard(customer, "tok_visa_unreadable"))).toMatchObject({
      retryable: false,
      message: "stripe POST /payment_methods: HTTP 400 no error type",
    });
    // JSON that is not an object is no answer either.
    stripe.failNext(/^\/v1\/customers$/, 503, null);
    expect((await processorError(processor().createCustomer("org-null"))).retryable).toBe(true);
  });

  it("refuses an API base whose path is not Stripe's /v1", () => {
    expect(() => processor({ base: `${stripe.url.replace(/\/v1$/, "")}/v2` })).toThrow(/must end in \/v1/);
  });
});

describe("Stripe adapter: charges", () => {
  /** A customer with an attached card of `token`, and a charge request for it. */
  async function chargeable(token: string, amountCents = 1234): Promise<ChargeRequest> {
    const p = processor();
    const customerRef = await p.createCustomer(`org-${token}`);
    const attached = await p.attachCard(customerRef, token);
    if (!attached.accepted) throw new Error(`${token} was not attached`);
    stripe.requests.length = 0;
    return {
      customerRef,
      paymentMethodRef: attached.card.ref,
      amountCents,
      currency: "USD",
      idempotencyKey: `dbaas-invoice-inv-${token}-1`,
      invoiceId: `inv-${token}`,
    };
  }

  it("confirms a PaymentIntent off-session at once, under the caller's key, as Stripe's API documents", async () => {
    const req = await chargeable("tok_visa_charge1");
    const result = await processor().charge(req);
    expect(result).toEqual({ paid: true, ref: expect.stringMatching(/^pi_fake\d+$/) });

    expect(stripe.requests.map((r) => [r.method, r.path, r.form])).toEqual([
      [
        "POST",
        "/v1/payment_intents",
        {
          amount: "1234",
          currency: "usd",
          customer: req.customerRef,
          payment_method: req.paymentMethodRef,
          confirm: "true",
          off_session: "true",
          description: "dbaas invoice inv-tok_visa_charge1",
          "metadata[invoice_id]": "inv-tok_visa_charge1",
        },
      ],
    ]);
    expect(stripe.requests[0]?.headers).toMatchObject({
      authorization: `Bearer ${KEY}`,
      "content-type": "application/x-www-form-urlencoded",
      "idempotency-key": "dbaas-invoice-inv-tok_visa_charge1-1",
    });
    expect(stripe.paymentIntents.get(result.paid ? result.ref : "")).toMatchObject({
      status: "succeeded",
      amount: 1234,
      currency: "usd",
      customer: req.customerRef,
      payment_method: req.paymentMethodRef,
    });
  });

  it("answers a repeated charge with the first PaymentIntent, and refuses the key with other parameters", async () => {
    const req = await chargeable("tok_visa_charge2");
    const first = await processor().charge(req);
    const intents = stripe.paymentIntents.size;
    expect(await processor().charge(req)).toEqual(first);
    expect(stripe.paymentIntents.size).toBe(intents);

    const other = await processorError(processor().charge({ ...req, amountCents: 999 }));
    expect(other).toMatchObject({ retryable: false, message: "stripe POST /payment_intents: HTTP 400 idempotency_error" });
    expect(stripe.paymentIntents.size).toBe(intents);
  });

  it("maps a declined card to a decline in its own words", async () => {
    const req = await chargeable("tok_chargeCustomerFail");
    expect(await processor().charge(req)).toEqual({ paid: false, reason: "the card was declined" });
    const [intent] = [...stripe.paymentIntents.values()].filter((pi) => pi.customer === req.customerRef);
    expect(intent?.status).toBe("requires_payment_method");

    const visa = await chargeable("tok_visa_charge3");
    const p = processor();
    stripe.failNext(/^\/v1\/payment_intents$/, 402, {
      error: { type: "card_error", code: "expired_card", message: "Your card has expired." },
    });
    expect(await p.charge({ ...visa, idempotencyKey: "k-expired" })).toEqual({ paid: false, reason: "the card has expired" });
    stripe.failNext(/^\/v1\/payment_intents$/, 402, { error: { type: "card_error", code: "authentication_required" } });
    expect(await p.charge({ ...visa, idempotencyKey: "k-auth" })).toEqual({ paid: false, reason: "the card was declined" });
    // An intent answered without an error but not paid is a decline too.
    stripe.failNext(/^\/v1\/payment_intents$/, 200, { id: "pi_x", object: "payment_intent", status: "requires_payment_method" });
    expect(await p.charge({ ...visa, idempotencyKey: "k-rpm" })).toEqual({ paid: false, reason: "the card was declined" });
  });

  it("tells an unknown outcome (send the same key again) from a request Stripe refused (nothing charged)", async () => {
    const req = await chargeable("tok_visa_charge4");
    const p = processor();
    const retryable = async (status: number, body?: unknown) => {
      stripe.failNext(/^\/v1\/payment_intents$/, status, body);
      return (await processorError(p.charge(req))).retryable;
    };
    for (const status of [500, 502, 429, 409]) expect(await retryable(status), String(status)).toBe(true);
    // A success it cannot read, or one still processing, may have charged the card.
    expect(await retryable(200, "<html>ok</html>")).toBe(true);
    expect(await retryable(200, { object: "payment_intent", status: "succeeded" })).toBe(true);
    expect(await retryable(200, { id: "pi_y", object: "payment_intent", status: "processing" })).toBe(true);

    expect(await retryable(400, { error: { type: "invalid_request_error", code: "amount_too_small" } })).toBe(false);
    expect(await retryable(200, { id: "pi_z", object: "payment_intent", status: "canceled" })).toBe(false);
    const wrongKey = await processorError(processor({ key: "sk_test_wrong_key_0000" }).charge(req));
    expect(wrongKey).toMatchObject({ retryable: false, message: "stripe POST /payment_intents: HTTP 401 invalid_request_error" });

    // Another customer's card is Stripe's refusal too.
    const other = await chargeable("tok_visa_charge5");
    const mismatch = await processorError(p.charge({ ...req, paymentMethodRef: other.paymentMethodRef, idempotencyKey: "k-mismatch" }));
    expect(mismatch.retryable).toBe(false);

    const hangs = await startFakeStripe(KEY);
    try {
      hangs.hang(/./);
      const timedOut = await processorError(createStripeProcessor({ secretKey: KEY, apiBase: hangs.url, timeoutMs: 100 }).charge(req));
      expect(timedOut).toMatchObject({ retryable: true, message: "stripe POST /payment_intents timed out after 100 ms" });
    } finally {
      await hangs.close();
    }
  });
});

describe("invoices charged through the Stripe adapter", () => {
  let env: Awaited<ReturnType<typeof createTestContext>>;
  let client: Client<typeof BillingService>;
  let crash = false;
  const log = captureLog();

  beforeAll(async () => {
    env = await createTestContext("2025-03-20T12:00:00Z", {
      log,
      processor: () => {
        const p = processor();
        return {
          ...p,
          async charge(req) {
            const result = await p.charge(req);
            if (crash) throw new Error("process died before storing the answer");
            return result;
          },
        };
      },
    });
    client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
  });

  afterAll(async () => {
    await env?.close();
  });

  async function run(at: string): Promise<void> {
    env.clock.set(at);
    await closeEndedPeriods(env.ctx);
    await chargeDueInvoices(env.ctx);
  }

  async function withMarchUsage(token: string) {
    const org = newOrg();
    env.clock.set("2025-03-20T12:00:00Z");
    const card = (await client.addPaymentMethod({ organizationId: org, type: "card", token })).paymentMethod!;
    await client.recordStatusEvents({
      events: [ev(org, "db-a", "small", "running", "2025-03-02T00:00:00Z"), ev(org, "db-a", "small", "stopped", "2025-03-02T07:30:00Z")],
    });
    return { org, card };
  }

  const intentsOf = (invoiceId: string) =>
    [...stripe.paymentIntents.values()].filter((pi) => (pi.metadata as Record<string, string>).invoice_id === invoiceId);

  it("pays an invoice with a PaymentIntent on the customer's default card", async () => {
    const { org, card } = await withMarchUsage("tok_visa_inv1");
    await run("2025-04-01T00:00:00Z");
    const invoice = (await client.listInvoices({ organizationId: org })).invoices[0]!;
    expect(invoice).toMatchObject({ period: "2025-03", amount: 0.45, status: "paid" });
    const { rows } = await env.ctx.pool.query(
      `SELECT pm.processor_ref, c.customer_ref FROM payment_methods pm JOIN processor_customers c USING (organization_id)
        WHERE pm.id = $1`,
      [card.id],
    );
    expect(intentsOf(invoice.id)).toEqual([
      expect.objectContaining({
        amount: 45,
        currency: "usd",
        status: "succeeded",
        customer: rows[0].customer_ref,
        payment_method: rows[0].processor_ref,
      }),
    ]);
  });

  it("makes a declined invoice past due and pays it with a new default", async () => {
    const { org } = await withMarchUsage("tok_chargeCustomerFail_inv");
    await run("2025-04-01T00:00:00Z");
    const invoice = (await client.listInvoices({ organizationId: org })).invoices[0]!;
    expect(invoice.status).toBe("past_due");
    expect((await client.getStanding({ organizationId: org })).hasPastDueInvoice).toBe(true);
    const visa = (await client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_visa_inv2" })).paymentMethod!;
    await client.updatePaymentMethod({ organizationId: org, id: visa.id, isDefault: true });
    expect((await client.listInvoices({ organizationId: org })).invoices[0]?.status).toBe("paid");
    expect(intentsOf(invoice.id).map((pi) => pi.status)).toEqual(["requires_payment_method", "succeeded"]);
  });

  it("sends a charge whose answer was lost again with its key: Stripe replays it, one PaymentIntent", async () => {
    const { org } = await withMarchUsage("tok_visa_inv3");
    crash = true;
    try {
      await run("2025-04-01T00:00:00Z");
    } finally {
      crash = false;
    }
    const open = (await client.listInvoices({ organizationId: org })).invoices[0]!;
    expect(open.status).toBe("open");
    expect(log.lines.find((l) => l.msg === "charging an invoice failed; retried later")?.fields).toMatchObject({ invoice_id: open.id });
    expect(intentsOf(open.id)).toHaveLength(1);

    await run("2025-04-01T00:10:00Z");
    const [paid] = (await client.listInvoices({ organizationId: org })).invoices;
    expect(paid?.status).toBe("paid");
    const sends = stripe.requests.filter((r) => r.path === "/v1/payment_intents" && r.form["metadata[invoice_id]"] === open.id);
    expect(sends.map((r) => r.headers["idempotency-key"])).toEqual([`dbaas-invoice-${open.id}-1`, `dbaas-invoice-${open.id}-1`]);
    const intents = intentsOf(open.id);
    expect(intents).toHaveLength(1);
    const stored = await env.ctx.pool.query("SELECT charge_ref FROM charge_attempts WHERE invoice_id = $1", [open.id]);
    expect(stored.rows).toEqual([{ charge_ref: intents[0]?.id }]);
  });
});

describe("AddPaymentMethod through the Stripe adapter", () => {
  let env: Awaited<ReturnType<typeof createTestContext>>;
  let client: Client<typeof BillingService>;
  const log = captureLog();

  beforeAll(async () => {
    env = await createTestContext("2025-03-20T12:00:00Z", { log, processor: () => processor() });
    client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
  });

  afterAll(async () => {
    await env?.close();
  });

  const customerCreations = () => stripe.requests.filter((r) => r.path === "/v1/customers").length;

  it("makes one Stripe customer per organization and keeps Stripe's ids, not the token", async () => {
    const org = newOrg();
    const first = (await client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_visa_h1" })).paymentMethod!;
    const second = (await client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_mastercard_h1" })).paymentMethod!;
    expect([first.brand, first.last4, first.expMonth, first.expYear, first.isDefault]).toEqual(["visa", "4242", 8, 2031, true]);
    expect([second.brand, second.last4, second.isDefault]).toEqual(["mastercard", "4444", false]);
    expect(customerCreations()).toBe(1);

    const rows = await env.ctx.pool.query("SELECT processor, processor_ref FROM payment_methods WHERE organization_id = $1 ORDER BY seq", [
      org,
    ]);
    const attached = stripe.requests.filter((r) => r.path.endsWith("/attach"));
    expect(rows.rows).toEqual(attached.map((r) => ({ processor: "stripe", processor_ref: r.path.split("/")[3] })));
    const customer = await env.ctx.pool.query("SELECT processor, customer_ref FROM processor_customers WHERE organization_id = $1", [org]);
    expect(customer.rows).toEqual([{ processor: "stripe", customer_ref: attached[0]?.form.customer }]);
  });

  it("creates a single customer for concurrent first adds", async () => {
    const org = newOrg();
    const added = await Promise.all(
      ["tok_visa_c1", "tok_mastercard_c2", "tok_visa_c3", "tok_mastercard_c4"].map(
        async (token) => (await client.addPaymentMethod({ organizationId: org, type: "card", token })).paymentMethod!,
      ),
    );
    expect(added.filter((m) => m.isDefault)).toHaveLength(1);
    expect(customerCreations()).toBe(1);
    expect(new Set(stripe.requests.filter((r) => r.path.endsWith("/attach")).map((r) => r.form.customer)).size).toBe(1);
    expect((await client.listPaymentMethods({ organizationId: org })).paymentMethods).toHaveLength(4);
  });

  it("answers a declined card with INVALID_ARGUMENT on token, without Stripe's wording or ids", async () => {
    const org = newOrg();
    const err = await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_declined_h" }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([{ field: "token", message: "was declined by the payment processor: the card was declined" }]);
    expect(JSON.stringify({ m: err.rawMessage, d: violationsOf(err) })).not.toMatch(/pm_|cus_|Your card/);
    expect((await client.listPaymentMethods({ organizationId: org })).paymentMethods).toEqual([]);
  });

  it("answers an outage as a failed dependency (ABORTED, the API's 503), stores nothing, and converges when the add is retried", async () => {
    const org = newOrg();
    log.lines.length = 0;
    stripe.failNext(/\/attach$/, 502);
    const err = await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_visa_outage" }));
    expect(err.code).toBe(Code.Aborted);
    expect(err.rawMessage).toBe("the payment processor is not reachable; try again shortly");
    expect((await client.listPaymentMethods({ organizationId: org })).paymentMethods).toEqual([]);
    expect(log.lines.find((l) => l.msg === "payment processor call failed")?.fields).toMatchObject({
      organization_id: org,
      processor: "stripe",
      retryable: true,
    });

    const retried = (await client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_visa_outage" })).paymentMethod!;
    expect(retried).toMatchObject({ brand: "visa", isDefault: true });
    // A retry after a lost answer: Stripe replays, and the row made the first time is given back.
    const replayed = (await client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_visa_outage" })).paymentMethod!;
    expect(replayed).toEqual(retried);
    expect((await client.listPaymentMethods({ organizationId: org })).paymentMethods).toEqual([retried]);
  });

  it("answers a refused request (a wrong key) with INTERNAL, and never logs the key or the token", async () => {
    const wrong = await createTestContext("2025-03-20T12:00:00Z", {
      log,
      processor: () => processor({ key: "sk_live_wrong_never_logged" }),
    });
    try {
      log.lines.length = 0;
      const c = createClient(BillingService, createRouterTransport(routes(wrong.ctx)));
      const err = await rejection(c.addPaymentMethod({ organizationId: newOrg(), type: "card", token: "tok_visa_wrongkey" }));
      expect(err.code).toBe(Code.Internal);
      expect(err.rawMessage).toBe("the payment processor refused the request");
      expect(log.lines.map((l) => l.msg)).toEqual(["payment processor call failed"]);
      expect(log.lines[0]?.fields).toMatchObject({ retryable: false, error: expect.any(ProcessorError) });
      const logged = JSON.stringify(log.lines.map((l) => ({ ...l, fields: { ...l.fields, error: String(l.fields.error) } })));
      expect(logged).toContain("HTTP 401");
      expect(logged).not.toMatch(/sk_live|sk_test|tok_/);
    } finally {
      await wrong.close();
    }
  });
});
