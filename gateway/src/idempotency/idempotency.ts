import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import type { Request, Response } from "express";
import type { GatewayContext } from "../context.ts";
import { ApiError, badRequest, classify, type ErrorDetail, type PublicCode } from "../errors.ts";
import type { Reply } from "../middleware/envelope.ts";
import "../locals.ts";

/** What is replayed: the handler's reply, or the error the client got. */
type Outcome =
  | { reply: Reply }
  | { error: { status: number; code: PublicCode; message: string; details: ErrorDetail[]; headers: Record<string, string> } };

/** What an Idempotency-Key may be: 1-255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;

// Answers that say the request was not carried out: the client may retry them with the same key.
const NOT_EXECUTED = new Set(["rate_limit_exceeded", "service_unavailable", "maintenance_mode"]);

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Stored responses can hold secrets (a new database's password, an API key),
 * so they are encrypted with a key derived from the gateway's secret and the
 * Idempotency-Key itself, which is stored only hashed: a copy of Redis alone
 * reveals nothing.
 */
function cipherKey(secret: string, id: string): Buffer {
  return createHmac("sha256", secret).update("idempotency\0").update(id).digest();
}

function seal(secret: string, id: string, outcome: Outcome): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", cipherKey(secret, id), iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(outcome), "utf8"), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64");
}

function open(secret: string, id: string, sealed: string): Outcome {
  const raw = Buffer.from(sealed, "base64");
  const decipher = createDecipheriv("aes-256-gcm", cipherKey(secret, id), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return JSON.parse(Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")) as Outcome;
}

function outcomeOf(err: unknown): Outcome {
  const { error } = classify(err);
  return {
    error: { status: error.status, code: error.code, message: error.message, details: error.details, headers: error.headers },
  };
}

/**
 * Stripe's Idempotency-Key semantics for POST: the first request with a key
 * runs and its response (success or error) is kept for 24 h and replayed to
 * every retry with the same key and the same request (`Idempotent-Replayed:
 * true`); the same key with a different request is 422; while the first is
 * still running, a retry is 409. Keys are scoped to the organization (to the
 * client IP on public routes). Answers meaning "not carried out" (429, 503)
 * are not kept, so the retry runs.
 */
export async function runIdempotent(ctx: GatewayContext, req: Request, res: Response, execute: () => Promise<Reply>): Promise<Reply> {
  const header = req.get("idempotency-key");
  if (req.method !== "POST" || header === undefined) return await execute();
  if (!IDEMPOTENCY_KEY_FORMAT.test(header)) {
    throw badRequest("malformed Idempotency-Key", [{ field: "Idempotency-Key", message: "must be 1-255 visible ASCII characters" }]);
  }
  const principal = res.locals.principal;
  const id = `${principal ? `org:${principal.organizationId}` : `ip:${req.ip}`}\n${header}`;
  const fingerprint = sha256(`${req.method} ${req.path}\n${JSON.stringify(req.body ?? {})}`);
  res.locals.stage = "idempotency";
  const claim = await ctx.idempotency.claim(sha256(id), fingerprint);

  if (claim.kind !== "claimed") {
    if (claim.fingerprint !== fingerprint) {
      throw new ApiError(422, "validation_error", "this Idempotency-Key was used with a different request", [
        { field: "Idempotency-Key", message: "already used with a different request" },
      ]);
    }
    if (claim.kind === "in-progress") {
      throw new ApiError(409, "resource_conflict", "a request with this Idempotency-Key is still in progress", [], {
        "Retry-After": "1",
      });
    }
    res.set("Idempotent-Replayed", "true");
    const outcome = open(ctx.config.internalSecret, id, claim.payload);
    if ("reply" in outcome) return outcome.reply;
    const e = outcome.error;
    throw new ApiError(e.status, e.code, e.message, e.details, e.headers);
  }

  let reply: Reply;
  try {
    reply = await execute();
  } catch (err) {
    const outcome = outcomeOf(err);
    if ("error" in outcome && NOT_EXECUTED.has(outcome.error.code)) await claim.release();
    else await claim.complete(seal(ctx.config.internalSecret, id, outcome));
    throw err;
  }
  await claim.complete(seal(ctx.config.internalSecret, id, { reply }));
  return reply;
}
