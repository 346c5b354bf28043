import { createHash } from "node:crypto";
import { randomToken, type Clock } from "@dbaas/kit";
import { ProcessorError, type ChargeRequest, type ChargeResult, type PaymentProcessor } from "./processor.ts";

interface TestCard {
  brand: string;
  last4: string;
  /** Attached fine; every charge of it is declined. */
  declinesCharges?: true;
}

// Named after Stripe's test-mode tokens, so a client written against either works with both.
const CARDS = new Map<string, TestCard>([
  ["tok_visa", { brand: "visa", last4: "4242" }],
  ["tok_mastercard", { brand: "mastercard", last4: "4444" }],
  ["tok_amex", { brand: "amex", last4: "8431" }],
  // As on Stripe: attached now, charging it is what fails.
  ["tok_chargeCustomerFail", { brand: "visa", last4: "0341", declinesCharges: true }],
]);

/** Tokens of cards the issuer declines outright, as Stripe's test mode does for these. */
const DECLINED = new Map<string, string>([
  ["tok_chargeDeclined", "the card was declined"],
  ["tok_chargeDeclinedInsufficientFunds", "the card was declined"],
  ["tok_chargeDeclinedExpiredCard", "the card has expired"],
]);

// The instrument's ref says whether its charges fail: the processor keeps no
// cards, so this holds across restarts of the local stack.
const DECLINING_REF_PREFIX = "pm_test_declines_";

/** A charge the test processor made, under its idempotency key. */
export interface TestCharge {
  request: ChargeRequest;
  fingerprint: string;
  result: ChargeResult;
}

/**
 * The processor of the local stack and the tests: deterministic, no network.
 * Cards expire in December three years after the clock's year, so they are
 * valid whenever the clock says it is. Charges are remembered by idempotency
 * key, as Stripe does: a repeated request gets the first answer and charges
 * once (`charges` is that ledger), one with the same key and other parameters
 * is refused. Detached cards (`detached`, by ref) are refused as Stripe refuses
 * them: the request, not the card, fails.
 */
export function createTestProcessor(
  clock: Clock,
): PaymentProcessor & { readonly charges: ReadonlyMap<string, TestCharge>; readonly detached: ReadonlySet<string> } {
  const charges = new Map<string, TestCharge>();
  const detached = new Set<string>();
  return {
    name: "test",
    charges,
    detached,
    async createCustomer(organizationId) {
      return `cus_test_${organizationId}`;
    },
    async attachCard(_customerRef, token) {
      const declined = DECLINED.get(token);
      if (declined) return { accepted: false, reason: declined };
      const card = CARDS.get(token);
      if (!card) return { accepted: false, reason: "it is not a valid card token" };
      return {
        accepted: true,
        card: {
          ref: `${card.declinesCharges ? DECLINING_REF_PREFIX : "pm_test_"}${randomToken(16)}`,
          brand: card.brand,
          last4: card.last4,
          expMonth: 12,
          expYear: clock.now().getUTCFullYear() + 3,
        },
      };
    },
    async charge(request) {
      const { idempotencyKey, ...params } = request;
      const fingerprint = createHash("sha256").update(JSON.stringify(params)).digest("hex");
      const first = charges.get(idempotencyKey);
      if (first && first.fingerprint !== fingerprint) {
        throw new ProcessorError("test processor: idempotency key reused with other parameters", false);
      }
      if (first) return first.result;
      if (detached.has(params.paymentMethodRef)) {
        throw new ProcessorError("test processor: the payment method is detached from the customer", false);
      }
      const result: ChargeResult = params.paymentMethodRef.startsWith(DECLINING_REF_PREFIX)
        ? { paid: false, reason: "the card was declined" }
        : { paid: true, ref: `pi_test_${randomToken(16)}` };
      charges.set(idempotencyKey, { request, fingerprint, result });
      return result;
    },
    async detachCard(_customerRef, paymentMethodRef) {
      detached.add(paymentMethodRef);
    },
  };
}
