import { createHmac, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";

/**
 * Service-to-service authentication: every internal call carries a short-lived
 * credential, `v1.<caller>.<expiry unix s>.<hmac>`, signed with the secret all
 * services of one deployment share (INTERNAL_AUTH_SECRET). A service port
 * reached without a valid one answers UNAUTHENTICATED.
 */
export const INTERNAL_AUTH_HEADER = "x-dbaas-internal-auth";
const LIFETIME_S = 60;

/** The authenticated calling service, available to handlers via `ctx.values.get(callerKey)`. */
export const callerKey = createContextKey<string>("", { description: "internal caller" });

function sign(secret: string, payload: string): string {
  return createHmac("sha256", secret).update(payload).digest("base64url");
}

/** Mints a credential for `caller`, valid for a minute. */
export function mintInternalToken(secret: string, caller: string, now = Date.now()): string {
  const exp = Math.floor(now / 1000) + LIFETIME_S;
  const payload = `v1.${caller}.${exp}`;
  return `${payload}.${sign(secret, payload)}`;
}

/** Returns the caller named by a valid credential, or undefined. */
export function verifyInternalToken(secret: string, token: string | null, now = Date.now()): string | undefined {
  if (!token) return undefined;
  const parts = token.split(".");
  if (parts.length !== 4 || parts[0] !== "v1") return undefined;
  const [, caller, expRaw, mac] = parts as [string, string, string, string];
  const expected = Buffer.from(sign(secret, `v1.${caller}.${expRaw}`));
  const given = Buffer.from(mac);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
  if (Number(expRaw) * 1000 < now) return undefined;
  return caller;
}

/** Client side: attaches a fresh credential to every call (re-minted when half its life is gone). */
export function internalCredentialInterceptor(secret: string, caller: string): Interceptor {
  let token = "";
  let mintedAt = 0;
  return (next) => async (req) => {
    const now = Date.now();
    if (now - mintedAt > (LIFETIME_S * 1000) / 2) {
      token = mintInternalToken(secret, caller, now);
      mintedAt = now;
    }
    req.header.set(INTERNAL_AUTH_HEADER, token);
    return await next(req);
  };
}

/** Server side: refuses calls without a valid credential, and records the caller. */
export function requireInternalAuth(secret: string): Interceptor {
  return (next) => async (req) => {
    const caller = verifyInternalToken(secret, req.header.get(INTERNAL_AUTH_HEADER));
    if (!caller) throw new ConnectError("missing or invalid internal credential", Code.Unauthenticated);
    req.contextValues.set(callerKey, caller);
    return await next(req);
  };
}
