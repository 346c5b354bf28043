import { createHash } from "node:crypto";
import Stripe from "stripe";
import { ProcessorError, type AttachedCard, type AttachResult, type ChargeResult, type PaymentProcessor } from "./processor.ts";

export const STRIPE_API_BASE = "https://api.stripe.com/v1";

export interface StripeOptions {
  /** `sk_live_…` / `sk_test_…`; sent only in the Authorization header. */
  secretKey: string;
  /** STRIPE_API_BASE in production; tests point it at a local server. Its path is Stripe's `/v1`. */
  apiBase: string;
  /** Per request: a hung processor must not hold the caller (default 20 s). */
  timeoutMs?: number;
}

/** What Stripe answered when it did not do what was asked: the HTTP status and its error's type and code. */
interface Refusal {
  status: number;
  type?: string;
  code?: string;
}

type Reply<T> = { ok: true; body: T } | { ok: false; refusal: Refusal };

// What a card error means for the user, in our words rather than Stripe's (whose messages may name ids).
const CARD_ERROR_REASONS = new Map<string, string>([
  ["expired_card", "the card has expired"],
  ["incorrect_cvc", "the card's security code is incorrect"],
  ["invalid_cvc", "the card's security code is incorrect"],
  ["incorrect_number", "the card number is incorrect"],
  ["invalid_number", "the card number is incorrect"],
  ["invalid_expiry_month", "the card's expiry date is invalid"],
  ["invalid_expiry_year", "the card's expiry date is invalid"],
]);

// Request errors that are the token's fault, when turning the token into a payment method.
const TOKEN_ERROR_REASONS = new Map<string, string>([
  ["resource_missing", "it is not a valid card token"],
  ["token_already_used", "the token was already used"],
  ["token_in_use", "the token was already used"],
]);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** An answer whose body is not a JSON object (a proxy's HTML page, say), with its status, which the SDK does not keep. */
class UnreadableAnswer extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status} with an unreadable body`);
  }
}

/**
 * Stripe's own Node HTTP client (the SDK's documented extension point), except that an answer
 * whose body is not a JSON object fails with its status: whether it may have charged a card, or
 * is worth asking again, depends on it.
 */
function statusKeepingHttpClient(): Stripe.HttpClient {
  const node = Stripe.createNodeHttpClient();
  return {
    getClientName: () => node.getClientName(),
    async makeRequest(...args) {
      const res = await node.makeRequest(...args);
      return {
        getStatusCode: () => res.getStatusCode(),
        getHeaders: () => res.getHeaders(),
        getRawResponse: () => res.getRawResponse(),
        toStream: (done) => res.toStream(done),
        dispose: () => res.dispose?.(),
        async toJSON() {
          let body: unknown;
          try {
            body = await res.toJSON();
          } catch (err) {
            // A body cut short is the SDK's connection error; only a body that arrived but does not parse is ours.
            if (err instanceof SyntaxError) throw new UnreadableAnswer(res.getStatusCode());
            throw err;
          }
          if (!isObject(body)) throw new UnreadableAnswer(res.getStatusCode());
          return body;
        },
      };
    },
  };
}

/** The SDK pointed at `apiBase`: Stripe itself, or a local server speaking its API in tests. */
function stripeClient(opts: StripeOptions, timeoutMs: number): Stripe {
  const url = new URL(opts.apiBase);
  if (url.pathname.replace(/\/+$/, "") !== "/v1") throw new Error(`the Stripe API base must end in /v1, got ${url.pathname}`);
  const protocol = url.protocol === "http:" ? "http" : "https";
  return new Stripe(opts.secretKey, {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port || (protocol === "http" ? 80 : 443),
    protocol,
    timeout: timeoutMs,
    // The callers retry (an add when the user does, a charge from the invoicing loop) with the same keys.
    maxNetworkRetries: 0,
    // No request metrics sent to Stripe, no telemetry id file written in the home directory.
    telemetry: false,
    httpClient: statusKeepingHttpClient(),
  });
}

function cardOf(pm: { id?: unknown; card?: unknown }): AttachedCard {
  const card = pm.card;
  if (
    typeof pm.id !== "string" ||
    !isObject(card) ||
    typeof card.brand !== "string" ||
    typeof card.last4 !== "string" ||
    typeof card.exp_month !== "number" ||
    typeof card.exp_year !== "number"
  ) {
    throw new ProcessorError("stripe answered with a payment method without its card details", false);
  }
  return { ref: pm.id, brand: card.brand, last4: card.last4, expMonth: card.exp_month, expYear: card.exp_year };
}

/**
 * Stripe's API through the official SDK. Each organization gets one Stripe
 * customer; a token becomes a PaymentMethod that is attached to it, which is
 * when Stripe checks the card. Every POST carries an Idempotency-Key derived
 * from what it acts on, so a retried add (after a timeout, or after our process
 * died between Stripe's answer and our commit) gets Stripe's first answer again
 * instead of a second customer or a "token already used". Charges are
 * PaymentIntents confirmed off-session at once, keyed by the caller (invoice and
 * attempt). A removed card is detached from the customer, which Stripe makes
 * final (a detached card cannot be used again).
 */
export function createStripeProcessor(opts: StripeOptions): PaymentProcessor {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const stripe = stripeClient(opts, timeoutMs);

  /**
   * Stripe's answer to one request (`path` names it in messages, relative to /v1), or its refusal.
   * A request that got no answer throws a retryable ProcessorError naming only the request: the
   * SDK's messages and causes are not ours to vouch for.
   */
  const send = async <T>(method: "GET" | "POST", path: string, request: () => Promise<T>): Promise<Reply<T>> => {
    try {
      return { ok: true, body: await request() };
    } catch (err) {
      if (err instanceof Stripe.errors.StripeConnectionError) {
        const timedOut = (err.detail as { code?: unknown } | undefined)?.code === "ETIMEDOUT";
        throw new ProcessorError(`stripe ${method} ${path} ${timedOut ? `timed out after ${timeoutMs} ms` : "could not be reached"}`, true);
      }
      if (err instanceof Stripe.errors.StripeError) {
        const unreadable = (err.raw as { exception?: unknown } | undefined)?.exception;
        if (unreadable instanceof UnreadableAnswer) return { ok: false, refusal: { status: unreadable.status } };
        if (err.statusCode !== undefined) return { ok: false, refusal: { status: err.statusCode, type: err.rawType, code: err.code } };
      }
      // Neither an answer nor a failed connection: the SDK refused the request before sending it.
      throw new ProcessorError(`stripe ${method} ${path} was not sent: ${(err as Error).name}`, false);
    }
  };

  // Stripe's outages, rate limits and idempotency conflicts are worth retrying; any other error is a request it will never take.
  const retryable = (r: Refusal) => r.status === 409 || r.status === 429 || r.status >= 500;
  const failure = (path: string, r: Refusal, method = "POST"): ProcessorError => {
    const { type = "no error type", code } = r;
    return new ProcessorError(`stripe ${method} ${path}: HTTP ${r.status} ${type}${code ? ` (${code})` : ""}`, retryable(r));
  };

  /** A rejection when the error is the card's fault, or, turning the token into a payment method, the token's. */
  const rejection = (r: Refusal, tokenStep: boolean): AttachResult | undefined => {
    const { type, code = "" } = r;
    if (type === "card_error") return { accepted: false, reason: CARD_ERROR_REASONS.get(code) ?? "the card was declined" };
    const reason = tokenStep && type === "invalid_request_error" ? TOKEN_ERROR_REASONS.get(code) : undefined;
    return reason === undefined ? undefined : { accepted: false, reason };
  };

  return {
    name: "stripe",

    async createCustomer(organizationId) {
      const reply = await send("POST", "/customers", () =>
        stripe.customers.create({ metadata: { organization_id: organizationId } }, { idempotencyKey: `dbaas-customer-${organizationId}` }),
      );
      if (!reply.ok) throw failure("/customers", reply.refusal);
      if (typeof reply.body.id !== "string") throw new ProcessorError("stripe answered a new customer without its id", false);
      return reply.body.id;
    },

    async attachCard(customerRef, token) {
      // Tokens are single-use, so customer and token name the request (hashed: keys show on Stripe's
      // dashboard). Stripe's reusable test-mode tokens (`tok_visa`) thus give one method per customer a day.
      const key = createHash("sha256").update(`${customerRef}\n${token}`).digest("hex");
      const created = await send("POST", "/payment_methods", () =>
        stripe.paymentMethods.create({ type: "card", card: { token } }, { idempotencyKey: `dbaas-pm-${key}` }),
      );
      if (!created.ok) {
        const rejected = rejection(created.refusal, true);
        if (rejected) return rejected;
        throw failure("/payment_methods", created.refusal);
      }
      const pm = cardOf(created.body);
      const path = `/payment_methods/${encodeURIComponent(pm.ref)}/attach`;
      const attached = await send("POST", path, () =>
        stripe.paymentMethods.attach(pm.ref, { customer: customerRef }, { idempotencyKey: `dbaas-attach-${pm.ref}-${customerRef}` }),
      );
      if (!attached.ok) {
        const rejected = rejection(attached.refusal, false);
        if (rejected) return rejected;
        throw failure(path, attached.refusal);
      }
      return { accepted: true, card: cardOf(attached.body) };
    },

    async charge(req): Promise<ChargeResult> {
      const path = "/payment_intents";
      const reply = await send("POST", path, () =>
        stripe.paymentIntents.create(
          {
            amount: req.amountCents,
            currency: req.currency.toLowerCase(),
            customer: req.customerRef,
            payment_method: req.paymentMethodRef,
            confirm: true,
            off_session: true,
            description: `dbaas invoice ${req.invoiceId}`,
            metadata: { invoice_id: req.invoiceId },
          },
          { idempotencyKey: req.idempotencyKey },
        ),
      );
      if (!reply.ok) {
        const { refusal } = reply;
        // Off-session, a declined card (or one that wants the cardholder to authenticate) is a 402 card_error.
        if (refusal.type === "card_error") {
          return { paid: false, reason: CARD_ERROR_REASONS.get(refusal.code ?? "") ?? "the card was declined" };
        }
        // A success we cannot read may have charged the card: only the same key may be sent again.
        if (refusal.status < 300) throw new ProcessorError(`stripe POST ${path}: HTTP ${refusal.status} with an unreadable body`, true);
        throw failure(path, refusal);
      }
      const { id, status } = reply.body as { id?: unknown; status?: unknown };
      if (typeof id !== "string") throw new ProcessorError(`stripe POST ${path}: a payment intent without its id`, true);
      if (status === "succeeded") return { paid: true, ref: id };
      if (status === "requires_payment_method" || status === "requires_action") return { paid: false, reason: "the card was declined" };
      // `processing` (not seen for cards) is no outcome yet: retryable keeps the attempt pending, never
      // charged again under a new key. Any other status is a request we did not mean to make.
      throw new ProcessorError(`stripe POST ${path}: payment intent ${String(status)}`, status === "processing");
    },

    async detachCard(customerRef, paymentMethodRef) {
      const pm = `/payment_methods/${encodeURIComponent(paymentMethodRef)}`;
      // Keyed by the instrument: a detach repeated within Stripe's idempotency window gets the first answer.
      const detached = await send("POST", `${pm}/detach`, () =>
        stripe.paymentMethods.detach(paymentMethodRef, {}, { idempotencyKey: `dbaas-detach-${paymentMethodRef}` }),
      );
      if (detached.ok) return;
      if (retryable(detached.refusal)) throw failure(`${pm}/detach`, detached.refusal);
      // Past that window Stripe refuses to detach what is not attached ("not attached to a customer so
      // detachment is impossible", no error code to go by). What counts is whether our customer still
      // holds the card, so ask: gone, or held by nobody (or not by us), is detached.
      const current = await send("GET", pm, () => stripe.paymentMethods.retrieve(paymentMethodRef));
      if (!current.ok) {
        if (current.refusal.status === 404 && current.refusal.code === "resource_missing") return;
        throw failure(pm, current.refusal, "GET");
      }
      const holder = current.body.customer;
      if ((typeof holder === "string" ? holder : holder?.id) !== customerRef) return;
      throw failure(`${pm}/detach`, detached.refusal);
    },
  };
}
