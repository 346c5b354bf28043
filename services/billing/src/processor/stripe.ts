import { createHash } from "node:crypto";
import {
  ProcessorError,
  type AttachedCard,
  type AttachResult,
  type ChargeResult,
  type PaymentProcessor,
} from "./processor.ts";

export const STRIPE_API_BASE = "https://api.stripe.com/v1";

export interface StripeOptions {
  /** `sk_live_…` / `sk_test_…`; sent only in the Authorization header. */
  secretKey: string;
  /** STRIPE_API_BASE in production; tests point it at a local server. */
  apiBase: string;
  /** Per request: a hung processor must not hold the caller (default 20 s). */
  timeoutMs?: number;
}

interface StripeError {
  type?: string;
  code?: string;
}

type Reply = { ok: true; body: Record<string, unknown> } | { ok: false; status: number; error: StripeError };

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

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function cardOf(pm: Record<string, unknown>): AttachedCard {
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
 * Stripe's HTTP API (form-encoded requests, JSON answers). Each organization
 * gets one Stripe customer; a token becomes a PaymentMethod that is attached to
 * it, which is when Stripe checks the card. Every POST carries an
 * Idempotency-Key derived from what it acts on, so a retried add (after a
 * timeout, or after our process died between Stripe's answer and our commit)
 * gets Stripe's first answer again instead of a second customer or a "token
 * already used". Charges are PaymentIntents confirmed off-session at once,
 * keyed by the caller (invoice and attempt). A removed card is detached from
 * the customer, which Stripe makes final (a detached card cannot be used again).
 */
export function createStripeProcessor(opts: StripeOptions): PaymentProcessor {
  const base = opts.apiBase.replace(/\/+$/, "");
  const timeoutMs = opts.timeoutMs ?? 20_000;

  /** A POST with its form and Idempotency-Key, or a GET (`post` unset). */
  const request = async (path: string, post?: { fields: Record<string, string>; idempotencyKey: string }): Promise<Reply> => {
    const method = post ? "POST" : "GET";
    let status: number;
    let text: string;
    try {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: post
          ? {
              authorization: `Bearer ${opts.secretKey}`,
              "content-type": "application/x-www-form-urlencoded",
              "idempotency-key": post.idempotencyKey,
            }
          : { authorization: `Bearer ${opts.secretKey}` },
        body: post ? new URLSearchParams(post.fields).toString() : undefined,
        signal: AbortSignal.timeout(timeoutMs),
      });
      status = res.status;
      text = await res.text();
    } catch (err) {
      // Only the error's name: fetch's messages and causes are not ours to vouch for.
      const what = (err as Error).name === "TimeoutError" ? `timed out after ${timeoutMs} ms` : "could not be reached";
      throw new ProcessorError(`stripe ${method} ${path} ${what}`, true);
    }
    const body = parseJson(text);
    if (status >= 200 && status < 300 && isObject(body)) return { ok: true, body };
    const error = isObject(body) && isObject(body.error) ? body.error : {};
    return {
      ok: false,
      status,
      error: {
        type: typeof error.type === "string" ? error.type : undefined,
        code: typeof error.code === "string" ? error.code : undefined,
      },
    };
  };

  const post = (path: string, fields: Record<string, string>, idempotencyKey: string) => request(path, { fields, idempotencyKey });

  // Stripe's outages, rate limits and idempotency conflicts are worth retrying; any other error is a request it will never take.
  const retryable = (reply: Extract<Reply, { ok: false }>) => reply.status === 409 || reply.status === 429 || reply.status >= 500;
  const failure = (path: string, reply: Extract<Reply, { ok: false }>, method = "POST"): ProcessorError => {
    const { type = "no error type", code } = reply.error;
    return new ProcessorError(`stripe ${method} ${path}: HTTP ${reply.status} ${type}${code ? ` (${code})` : ""}`, retryable(reply));
  };

  /** A rejection when the error is the card's fault, or, turning the token into a payment method, the token's. */
  const rejection = (reply: Extract<Reply, { ok: false }>, tokenStep: boolean): AttachResult | undefined => {
    const { type, code = "" } = reply.error;
    if (type === "card_error") return { accepted: false, reason: CARD_ERROR_REASONS.get(code) ?? "the card was declined" };
    const reason = tokenStep && type === "invalid_request_error" ? TOKEN_ERROR_REASONS.get(code) : undefined;
    return reason === undefined ? undefined : { accepted: false, reason };
  };

  return {
    name: "stripe",

    async createCustomer(organizationId) {
      const reply = await post("/customers", { "metadata[organization_id]": organizationId }, `dbaas-customer-${organizationId}`);
      if (!reply.ok) throw failure("/customers", reply);
      if (typeof reply.body.id !== "string") throw new ProcessorError("stripe answered a new customer without its id", false);
      return reply.body.id;
    },

    async attachCard(customerRef, token) {
      // Tokens are single-use, so customer and token name the request (hashed: keys show on Stripe's
      // dashboard). Stripe's reusable test-mode tokens (`tok_visa`) thus give one method per customer a day.
      const key = createHash("sha256").update(`${customerRef}\n${token}`).digest("hex");
      const created = await post("/payment_methods", { type: "card", "card[token]": token }, `dbaas-pm-${key}`);
      if (!created.ok) {
        const rejected = rejection(created, true);
        if (rejected) return rejected;
        throw failure("/payment_methods", created);
      }
      const pm = cardOf(created.body);
      const path = `/payment_methods/${encodeURIComponent(pm.ref)}/attach`;
      const attached = await post(path, { customer: customerRef }, `dbaas-attach-${pm.ref}-${customerRef}`);
      if (!attached.ok) {
        const rejected = rejection(attached, false);
        if (rejected) return rejected;
        throw failure(path, attached);
      }
      return { accepted: true, card: cardOf(attached.body) };
    },

    async charge(req): Promise<ChargeResult> {
      const path = "/payment_intents";
      const reply = await post(
        path,
        {
          amount: String(req.amountCents),
          currency: req.currency.toLowerCase(),
          customer: req.customerRef,
          payment_method: req.paymentMethodRef,
          confirm: "true",
          off_session: "true",
          description: `dbaas invoice ${req.invoiceId}`,
          "metadata[invoice_id]": req.invoiceId,
        },
        req.idempotencyKey,
      );
      if (!reply.ok) {
        // Off-session, a declined card (or one that wants the cardholder to authenticate) is a 402 card_error.
        if (reply.error.type === "card_error") {
          return { paid: false, reason: CARD_ERROR_REASONS.get(reply.error.code ?? "") ?? "the card was declined" };
        }
        // A success we cannot read may have charged the card: only the same key may be sent again.
        if (reply.status < 300) throw new ProcessorError(`stripe POST ${path}: HTTP ${reply.status} with an unreadable body`, true);
        throw failure(path, reply);
      }
      const { id, status } = reply.body;
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
      const detached = await post(`${pm}/detach`, {}, `dbaas-detach-${paymentMethodRef}`);
      if (detached.ok) return;
      if (retryable(detached)) throw failure(`${pm}/detach`, detached);
      // Past that window Stripe refuses to detach what is not attached ("not attached to a customer so
      // detachment is impossible", no error code to go by). What counts is whether our customer still
      // holds the card, so ask: gone, or held by nobody (or not by us), is detached.
      const current = await request(pm);
      if (!current.ok) {
        if (current.status === 404 && current.error.code === "resource_missing") return;
        throw failure(pm, current, "GET");
      }
      if (current.body.customer !== customerRef) return;
      throw failure(`${pm}/detach`, detached);
    },
  };
}
