import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local server answering like Stripe's documented endpoints for what billing
 * uses (customers, payment methods from card tokens, attach, detach, retrieve,
 * off-session PaymentIntents confirmed at once), since Stripe is
 * not reachable from here. It checks the secret key and the form encoding,
 * replays answers by Idempotency-Key like Stripe, and records every request.
 */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  form: Record<string, string>;
}

interface FakeCard {
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  /** Stripe checks the card when it is attached: this card error code then. */
  declineOnAttach?: string;
  /** Attached fine; every charge of it fails with this card error code. */
  declineOnCharge?: string;
}

/**
 * The cards the fake knows. Like real tokens (and unlike Stripe's reusable
 * test-mode ones) each token is single-use, so tests mint distinct ones:
 * `tok_visa_<anything>` is a Visa too. Anything else is "No such token".
 */
export const FAKE_TOKENS: Record<string, FakeCard> = {
  tok_visa: { brand: "visa", last4: "4242", exp_month: 8, exp_year: 2031 },
  tok_mastercard: { brand: "mastercard", last4: "4444", exp_month: 3, exp_year: 2030 },
  tok_expired: { brand: "visa", last4: "0069", exp_month: 1, exp_year: 2030, declineOnAttach: "expired_card" },
  tok_declined: { brand: "visa", last4: "0002", exp_month: 1, exp_year: 2030, declineOnAttach: "card_declined" },
  tok_chargeCustomerFail: { brand: "visa", last4: "0341", exp_month: 1, exp_year: 2030, declineOnCharge: "card_declined" },
};

interface Answer {
  status: number;
  body: unknown;
}

export interface FakeStripe {
  /** The API base, like https://api.stripe.com/v1. */
  url: string;
  requests: RecordedRequest[];
  customers: Map<string, Record<string, string>>;
  paymentMethods: Map<string, Record<string, unknown>>;
  paymentIntents: Map<string, Record<string, unknown>>;
  /** The next request whose path matches gets this answer instead, before any processing (and is not remembered). */
  failNext(path: RegExp, status: number, body?: unknown): void;
  /** Requests whose path matches are held unanswered (a hung processor). */
  hang(path: RegExp): void;
  /** Forgets every Idempotency-Key, as Stripe does after 24 hours. */
  forgetIdempotencyKeys(): void;
  close(): Promise<void>;
}

const error = (status: number, type: string, message: string, code?: string, param?: string): Answer => ({
  status,
  body: { error: { type, message, ...(code ? { code } : {}), ...(param ? { param } : {}) } },
});

function metadataOf(form: Record<string, string>): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(form)) {
    const key = /^metadata\[(.+)\]$/.exec(k)?.[1];
    if (key !== undefined) metadata[key] = v;
  }
  return metadata;
}

export async function startFakeStripe(secretKey: string): Promise<FakeStripe> {
  const requests: RecordedRequest[] = [];
  const customers = new Map<string, Record<string, string>>();
  const paymentMethods = new Map<string, Record<string, unknown>>();
  // What the card of each payment method will do, kept out of the objects the fake answers with.
  const cards = new Map<string, FakeCard>();
  const paymentIntents = new Map<string, Record<string, unknown>>();
  const usedTokens = new Set<string>();
  const idempotent = new Map<string, { params: string; answer: Answer }>();
  const failures: { path: RegExp; answer: Answer }[] = [];
  const hung: RegExp[] = [];
  let seq = 0;

  // Only what billing does: confirmed at once, off-session, on a card attached to the customer.
  const paymentIntent = (form: Record<string, string>): Answer => {
    if (!/^[1-9][0-9]*$/.test(form.amount ?? "")) {
      return error(400, "invalid_request_error", "Invalid positive integer", "parameter_invalid_integer", "amount");
    }
    if (!/^[a-z]{3}$/.test(form.currency ?? ""))
      return error(400, "invalid_request_error", "Invalid currency", "parameter_invalid_empty", "currency");
    if (!customers.has(form.customer ?? "")) {
      return error(400, "invalid_request_error", `No such customer: '${form.customer}'`, "resource_missing", "customer");
    }
    const pm = paymentMethods.get(form.payment_method ?? "");
    if (!pm)
      return error(400, "invalid_request_error", `No such PaymentMethod: '${form.payment_method}'`, "resource_missing", "payment_method");
    if (pm.customer !== form.customer) {
      return error(
        400,
        "invalid_request_error",
        "The provided PaymentMethod does not belong to the Customer.",
        undefined,
        "payment_method",
      );
    }
    if (form.confirm !== "true" || form.off_session !== "true") {
      return error(400, "invalid_request_error", "the fake only confirms off-session payment intents at once");
    }
    const metadata = metadataOf(form);
    const declineOnCharge = cards.get(pm.id as string)?.declineOnCharge;
    const pi: Record<string, unknown> = {
      id: `pi_fake${++seq}`,
      object: "payment_intent",
      amount: Number(form.amount),
      currency: form.currency,
      customer: form.customer,
      description: form.description ?? null,
      metadata,
      payment_method: declineOnCharge ? null : pm.id,
      status: declineOnCharge ? "requires_payment_method" : "succeeded",
    };
    paymentIntents.set(pi.id as string, pi);
    if (!declineOnCharge) return { status: 200, body: pi };
    // As Stripe answers a declined off-session confirmation: a 402 card error carrying the intent.
    return {
      status: 402,
      body: {
        error: {
          type: "card_error",
          code: declineOnCharge,
          decline_code: "generic_decline",
          message: "Your card was declined.",
          payment_intent: pi,
        },
      },
    };
  };

  const handle = (method: string, path: string, form: Record<string, string>): Answer => {
    const retrieve = /^\/v1\/payment_methods\/([^/]+)$/.exec(path)?.[1];
    if (method === "GET" && retrieve !== undefined) {
      const stored = paymentMethods.get(decodeURIComponent(retrieve));
      if (!stored) return error(404, "invalid_request_error", `No such PaymentMethod: '${retrieve}'`, "resource_missing", "payment_method");
      return { status: 200, body: stored };
    }
    if (method !== "POST") return error(404, "invalid_request_error", "Unrecognized request URL");
    if (path === "/v1/customers") {
      const id = `cus_fake${++seq}`;
      const metadata = metadataOf(form);
      customers.set(id, metadata);
      return { status: 200, body: { id, object: "customer", metadata } };
    }
    if (path === "/v1/payment_methods") {
      if (form.type !== "card") return error(400, "invalid_request_error", "Invalid type", "parameter_invalid_empty", "type");
      const token = form["card[token]"] ?? "";
      const known = Object.keys(FAKE_TOKENS).find((k) => token === k || token.startsWith(`${k}_`));
      const card = known && FAKE_TOKENS[known];
      if (!card) return error(400, "invalid_request_error", `No such token: '${token}'`, "resource_missing", "card[token]");
      if (usedTokens.has(token)) {
        return error(400, "invalid_request_error", `You cannot use a Stripe token more than once: ${token}.`, "token_already_used");
      }
      usedTokens.add(token);
      const { declineOnAttach: _a, declineOnCharge: _c, ...details } = card;
      const pm = { id: `pm_fake${++seq}`, object: "payment_method", type: "card", customer: null, card: { ...details, funding: "credit" } };
      paymentMethods.set(pm.id, pm);
      cards.set(pm.id, card);
      return { status: 200, body: pm };
    }
    const attach = /^\/v1\/payment_methods\/([^/]+)\/attach$/.exec(path)?.[1];
    if (attach !== undefined) {
      const stored = paymentMethods.get(decodeURIComponent(attach));
      if (!stored) return error(404, "invalid_request_error", `No such PaymentMethod: '${attach}'`, "resource_missing", "payment_method");
      if (!customers.has(form.customer ?? "")) {
        return error(400, "invalid_request_error", `No such customer: '${form.customer}'`, "resource_missing", "customer");
      }
      const declineOnAttach = cards.get(stored.id as string)?.declineOnAttach;
      if (declineOnAttach) return error(402, "card_error", "Your card was declined.", declineOnAttach);
      stored.customer = form.customer;
      return { status: 200, body: stored };
    }
    const detach = /^\/v1\/payment_methods\/([^/]+)\/detach$/.exec(path)?.[1];
    if (detach !== undefined) {
      const stored = paymentMethods.get(decodeURIComponent(detach));
      if (!stored) return error(404, "invalid_request_error", `No such PaymentMethod: '${detach}'`, "resource_missing", "payment_method");
      // Stripe's wording, and no error code.
      if (stored.customer === null) {
        return error(
          400,
          "invalid_request_error",
          "The payment method you provided is not attached to a customer so detachment is impossible.",
        );
      }
      stored.customer = null;
      return { status: 200, body: stored };
    }
    if (path === "/v1/payment_intents") return paymentIntent(form);
    return error(404, "invalid_request_error", `Unrecognized request URL (POST: ${path})`);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const form = Object.fromEntries(new URLSearchParams(raw));
      const [path = ""] = (req.url ?? "").split("?");
      requests.push({ method: req.method ?? "", path, headers: req.headers, form });
      const send = ({ status, body }: Answer, replayed = false) => {
        res.writeHead(status, { "content-type": "application/json", ...(replayed ? { "idempotent-replayed": "true" } : {}) });
        // A string body goes out as it is: a proxy's HTML page, say.
        res.end(typeof body === "string" ? body : JSON.stringify(body));
      };
      if (hung.some((p) => p.test(path))) return;
      const failure = failures.find((f) => f.path.test(path));
      if (failure) {
        failures.splice(failures.indexOf(failure), 1);
        return send(failure.answer);
      }
      if (req.headers.authorization !== `Bearer ${secretKey}`) {
        return send(error(401, "invalid_request_error", `Invalid API Key provided: ${String(req.headers.authorization).slice(7, 15)}****`));
      }
      if (req.method === "POST" && req.headers["content-type"] !== "application/x-www-form-urlencoded") {
        return send(error(400, "invalid_request_error", "Invalid request: expected a form-encoded body"));
      }
      const key = req.headers["idempotency-key"];
      if (typeof key === "string") {
        const seen = idempotent.get(key);
        if (seen) {
          if (seen.params !== raw) {
            return send(error(400, "idempotency_error", "Keys for idempotent requests can only be used with the same parameters"));
          }
          return send(seen.answer, true);
        }
      }
      const answer = handle(req.method ?? "", path, form);
      if (typeof key === "string") idempotent.set(key, { params: raw, answer });
      send(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    customers,
    paymentMethods,
    paymentIntents,
    failNext(path, status, body = { error: { type: "api_error", message: "An unknown error occurred" } }) {
      failures.push({ path, answer: { status, body } });
    },
    hang(path) {
      hung.push(path);
    },
    forgetIdempotencyKeys() {
      idempotent.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
