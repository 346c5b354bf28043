import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ProcessorError, type PaymentProcessor } from "../src/processor/processor.ts";
import { createStripeProcessor } from "../src/processor/stripe.ts";
import { startFakeStripe, type FakeStripe } from "./fake-stripe.ts";

const KEY = "sk_test_detach_51Hx9q2eZvKYlo2C";

let stripe: FakeStripe;
let p: PaymentProcessor;
let tokenSeq = 0;

beforeAll(async () => {
  stripe = await startFakeStripe(KEY);
  p = createStripeProcessor({ secretKey: KEY, apiBase: stripe.url });
});

afterAll(async () => {
  await stripe?.close();
});

afterEach(() => {
  stripe.requests.length = 0;
});

/** A customer holding a fresh Visa: the customer's and the card's Stripe ids. */
async function attached(): Promise<{ customer: string; ref: string }> {
  const customer = await p.createCustomer(`org-detach${++tokenSeq}`);
  const result = await p.attachCard(customer, `tok_visa_detach${tokenSeq}`);
  if (!result.accepted) throw new Error("the fake declined a Visa");
  return { customer, ref: result.card.ref };
}

async function failure(call: Promise<unknown>): Promise<ProcessorError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProcessorError);
  return err as ProcessorError;
}

describe("Stripe adapter: detaching a card", () => {
  it("detaches the payment method from the customer with an idempotency key naming it", async () => {
    const { customer, ref } = await attached();
    expect(stripe.paymentMethods.get(ref)?.customer).toBe(customer);
    stripe.requests.length = 0;
    await p.detachCard(customer, ref);
    expect(stripe.paymentMethods.get(ref)?.customer).toBeNull();
    expect(stripe.requests.map((r) => [r.method, r.path, r.form, r.headers["idempotency-key"]])).toEqual([
      ["POST", `/v1/payment_methods/${ref}/detach`, {}, `dbaas-detach-${ref}`],
    ]);
  });

  it("is idempotent: again at once (Stripe replays its answer) and after Stripe forgot the key (it checks the card)", async () => {
    const { customer, ref } = await attached();
    await p.detachCard(customer, ref);
    await p.detachCard(customer, ref);
    stripe.forgetIdempotencyKeys();
    stripe.requests.length = 0;
    await p.detachCard(customer, ref);
    // Refused as "not attached", then the card is looked at: held by nobody.
    expect(stripe.requests.map((r) => [r.method, r.path])).toEqual([
      ["POST", `/v1/payment_methods/${ref}/detach`],
      ["GET", `/v1/payment_methods/${ref}`],
    ]);
    // A card Stripe does not know is not attached either.
    await p.detachCard(customer, "pm_never_existed");
  });

  it("cannot charge a detached card", async () => {
    const { customer, ref } = await attached();
    await p.detachCard(customer, ref);
    const err = await failure(
      p.charge({
        customerRef: customer,
        paymentMethodRef: ref,
        amountCents: 500,
        currency: "USD",
        idempotencyKey: "dbaas-invoice-x-1",
        invoiceId: "inv-x",
      }),
    );
    expect(err.retryable).toBe(false);
  });

  it("fails retryably when Stripe is down, and non-retryably when a refused detach leaves the card attached", async () => {
    const { customer, ref } = await attached();
    stripe.failNext(/\/detach$/, 500);
    expect((await failure(p.detachCard(customer, ref))).retryable).toBe(true);
    expect(stripe.paymentMethods.get(ref)?.customer).toBe(customer);

    stripe.failNext(/\/detach$/, 400, { error: { type: "invalid_request_error", message: "something else" } });
    const err = await failure(p.detachCard(customer, ref));
    expect(err.retryable).toBe(false);
    expect(err.message).toBe(`stripe POST /payment_methods/${ref}/detach: HTTP 400 invalid_request_error`);
    expect(stripe.paymentMethods.get(ref)?.customer).toBe(customer);

    // Unreachable: retryable, and the message says which request.
    const down = createStripeProcessor({ secretKey: KEY, apiBase: "http://127.0.0.1:9/v1", timeoutMs: 2_000 });
    const unreachable = await failure(down.detachCard(customer, ref));
    expect([unreachable.retryable, unreachable.message]).toEqual([true, `stripe POST /payment_methods/${ref}/detach could not be reached`]);
  });
});
