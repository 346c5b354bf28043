import { createHmac, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";

/**
 * Service-to-service authentication: every internal call carries a short-lived
 * credential, `v1.<caller>.<expiry unix s>.<hmac>`, signed with the secret all
 * services of one deployment share (INTERNAL_AUTH_SECRET). A service port
 * reached without a valid one answers UNAUTHENTICATED. Every internal caller
 * mints them here: the services, the agents, the operator tools.
 *
 * Credentials are minted for a minute and live at most MAX_LIFETIME_S: one
 * whose expiry is further away than that is refused, whoever signed it, so a
 * leaked credential is worth minutes, never more (a signer with a skewed clock
 * gets up to MAX_LIFETIME_S − LIFETIME_S of slack).
 */
export const INTERNAL_AUTH_HEADER = "x-dbaas-internal-auth";
const LIFETIME_S = 60;
/** The longest an internal credential may be valid for (5 minutes; docs/decisions.md, "Internal credentials"). */
export const MAX_LIFETIME_S = 300;

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
  if (!/^\d{1,12}$/.test(expRaw)) return undefined;
  const expMs = Number(expRaw) * 1000;
  if (expMs < now || expMs > now + MAX_LIFETIME_S * 1000) return undefined;
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

/** How many verified credentials one server remembers: a few per calling process is plenty. */
const REMEMBERED_CREDENTIALS = 256;

/**
 * Credentials this server has already verified, with their expiry. A caller
 * presents the same credential on every call for half its lifetime, so after
 * the first call checking it is a map lookup instead of an HMAC. Only valid
 * credentials are remembered (garbage cannot fill the map), and an unseen
 * credential still goes through the timing-safe comparison.
 */
class VerifiedCredentials {
  private readonly byToken = new Map<string, { caller: string; expiresAtMs: number }>();

  constructor(private readonly secret: string) {}

  /** The caller named by `token` if it is valid now, as verifyInternalToken decides. */
  verify(token: string | null, now = Date.now()): string | undefined {
    if (!token) return undefined;
    const known = this.byToken.get(token);
    if (known !== undefined) {
      if (known.expiresAtMs >= now && known.expiresAtMs <= now + MAX_LIFETIME_S * 1000) return known.caller;
      this.byToken.delete(token);
      return undefined;
    }
    const caller = verifyInternalToken(this.secret, token, now);
    if (caller !== undefined) this.remember(token, caller, now);
    return caller;
  }

  /** Keeps `token`, first dropping expired entries, then the oldest if still full. */
  private remember(token: string, caller: string, now: number): void {
    if (this.byToken.size >= REMEMBERED_CREDENTIALS) {
      for (const [t, entry] of this.byToken) if (entry.expiresAtMs < now) this.byToken.delete(t);
      if (this.byToken.size >= REMEMBERED_CREDENTIALS) this.byToken.delete(this.byToken.keys().next().value!);
    }
    this.byToken.set(token, { caller, expiresAtMs: Number(token.split(".")[2]) * 1000 });
  }
}

/** Server side: refuses calls without a valid credential, and records the caller. */
export function requireInternalAuth(secret: string): Interceptor {
  const credentials = new VerifiedCredentials(secret);
  return (next) => async (req) => {
    const caller = credentials.verify(req.header.get(INTERNAL_AUTH_HEADER));
    if (!caller) throw new ConnectError("missing or invalid internal credential", Code.Unauthenticated);
    req.contextValues.set(callerKey, caller);
    return await next(req);
  };
}
