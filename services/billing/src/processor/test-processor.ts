import { randomToken, type Clock } from "@dbaas/kit";
import type { PaymentProcessor } from "./processor.ts";

// Named after Stripe's test-mode tokens, so a client written against either works with both.
const CARDS = new Map<string, { brand: string; last4: string }>([
  ["tok_visa", { brand: "visa", last4: "4242" }],
  ["tok_mastercard", { brand: "mastercard", last4: "4444" }],
  ["tok_amex", { brand: "amex", last4: "8431" }],
  // As on Stripe: attached now, charging it is what fails.
  ["tok_chargeCustomerFail", { brand: "visa", last4: "0341" }],
]);

/** Tokens of cards the issuer declines outright, as Stripe's test mode does for these. */
const DECLINED = new Map<string, string>([
  ["tok_chargeDeclined", "the card was declined"],
  ["tok_chargeDeclinedInsufficientFunds", "the card was declined"],
  ["tok_chargeDeclinedExpiredCard", "the card has expired"],
]);

/**
 * The processor of the local stack and the tests: deterministic, no network.
 * Cards expire in December three years after the clock's year, so they are
 * valid whenever the clock says it is.
 */
export function createTestProcessor(clock: Clock): PaymentProcessor {
  return {
    name: "test",
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
          ref: `pm_test_${randomToken(16)}`,
          ...card,
          expMonth: 12,
          expYear: clock.now().getUTCFullYear() + 3,
        },
      };
    },
  };
}
