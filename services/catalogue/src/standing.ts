import { Code, type CallOptions } from "@connectrpc/connect";
import { dependencyUnavailable, type Logger, withReason } from "@dbaas/kit";

/** What billing's GetStanding answers (structurally: the kit does not depend on the generated code). */
export interface Standing {
  hasDefaultPaymentMethod: boolean;
  hasPastDueInvoice: boolean;
}

/** The part of a billing client that says whether an organization is in good standing. */
export interface StandingSource {
  getStanding(request: { organizationId: string }, options?: CallOptions): Promise<Standing>;
}

/** docs/product.md, Billing: without a default payment method an organization runs only this tier… */
export const FREE_TIER = "micro";
/** …at most this many databases of it, and stays off the paid plans (catalogue.ts, PAID_PLANS). */
export const FREE_RUNNING = 2;

/** Whether running databases of these tiers at once fits the free allowance (no payment method needed). */
export function fitsFreeAllowance(runningTiers: readonly string[]): boolean {
  return runningTiers.length <= FREE_RUNNING && runningTiers.every((t) => t === FREE_TIER);
}

/** How long billing may take to answer. */
const STANDING_TIMEOUT_MS = 5_000;

/**
 * Asks billing whether the organization may go beyond the free allowance
 * (docs/product.md, Billing: not without a default payment method, nor with an
 * unpaid past-due invoice) and throws the 402 (FAILED_PRECONDITION, reason
 * payment_required) when it may not. `what` is what it was trying to do, for
 * the message. When billing cannot be asked the answer is
 * dependencyUnavailable (the API's 503), never billing's own error.
 */
export async function requireGoodStanding(billing: StandingSource, log: Logger, organizationId: string, what: string): Promise<void> {
  let standing: Standing;
  try {
    standing = await billing.getStanding({ organizationId }, { timeoutMs: STANDING_TIMEOUT_MS });
  } catch (err) {
    log.error("could not ask billing for the organization's standing", { organization_id: organizationId, error: err });
    throw dependencyUnavailable("could not check the organization's payment method; try again shortly");
  }
  if (standing.hasPastDueInvoice) {
    throw withReason(
      `an invoice is past due; to ${what}, pay it by adding a payment method or making another one the default`,
      Code.FailedPrecondition,
      "payment_required",
    );
  }
  if (!standing.hasDefaultPaymentMethod) {
    throw withReason(`to ${what}, add a payment method (POST /v1/billing/payment-methods)`, Code.FailedPrecondition, "payment_required");
  }
}
