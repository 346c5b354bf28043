/** What the processor reports about a card it now holds. The card number never reaches us. */
export interface AttachedCard {
  /** The processor's own id of the instrument, what charges will name. */
  ref: string;
  /** Lowercase, as the processor names it (`visa`, `mastercard`, `amex`, …). */
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

/**
 * The processor's answer to a token. A rejection is the token's fault (invalid,
 * used, the card declined) and its reason is fit to show the user; it never
 * carries the processor's own wording or ids.
 */
export type AttachResult = { accepted: true; card: AttachedCard } | { accepted: false; reason: string };

/** A charge of one invoice to an instrument the processor holds for the customer. */
export interface ChargeRequest {
  customerRef: string;
  paymentMethodRef: string;
  /** In the currency's smallest unit (cents). */
  amountCents: number;
  /** ISO 4217, as the catalogue names it (`USD`). */
  currency: string;
  /**
   * Names this charge: the processor answers a request repeated with the same
   * key and parameters with its first answer, without charging again. Derived
   * from the invoice and the attempt, so a charge whose answer was lost can be
   * sent again safely.
   */
  idempotencyKey: string;
  /** Ours, for the processor's records. */
  invoiceId: string;
}

/**
 * The processor's answer to a charge: paid, with its id of the payment; or
 * declined, the card's fault, with a reason in our words fit to show the user.
 */
export type ChargeResult = { paid: true; ref: string } | { paid: false; reason: string };

/**
 * The payment processor, behind one interface: the test processor locally, Stripe
 * in production. Implementations never log or keep the token.
 */
export interface PaymentProcessor {
  /** Stored with every customer and instrument: an id means nothing to another processor. */
  readonly name: string;
  /** A new processor customer for the organization (called once per organization). */
  createCustomer(organizationId: string): Promise<string>;
  /** Turns a token from the processor's client-side SDK into a card held for the customer. */
  attachCard(customerRef: string, token: string): Promise<AttachResult>;
  /**
   * Charges a card off-session (no user present). A ProcessorError means the
   * outcome is unknown when retryable (send the same request again, with its
   * key) and that nothing was charged when not.
   */
  charge(request: ChargeRequest): Promise<ChargeResult>;
  /**
   * Makes the processor let go of a card it holds for the customer, so it can
   * never be charged again. Idempotent: a card already detached, or one the
   * processor no longer knows, counts as detached. A ProcessorError means it
   * may still be attached (retryable: try again later).
   */
  detachCard(customerRef: string, paymentMethodRef: string): Promise<void>;
}

/**
 * The processor could not be asked (unreachable, timed out, overloaded:
 * `retryable`), or refused our own request (a bad key, a request it does not
 * understand). The message names neither the token nor a secret.
 */
export class ProcessorError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "ProcessorError";
  }
}
