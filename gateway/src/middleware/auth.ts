import { createHash } from "node:crypto";
import type { RequestHandler } from "express";
import type { Clock } from "@dbaas/kit";
import type { Principal } from "@dbaas/proto/identity";
import type { GatewayContext } from "../context.ts";
import { insufficientPermissions, invalidToken } from "../errors.ts";
import type { Permission } from "../routes/route.ts";
import "../locals.ts";

const MAX_TTL_MS = 30_000;
const MAX_ENTRIES = 10_000;

/**
 * Principals recently resolved by identity, keyed by the SHA-256 of the
 * bearer token so the raw credential is never held as a key. An entry lives at
 * most 30 s and never beyond the credential's own expiry. Concurrent lookups
 * of one token share one call to identity.
 */
export interface AuthCache {
  resolve(token: string, load: () => Promise<Principal>): Promise<Principal>;
}

function tokenKey(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export function createAuthCache(clock: Clock): AuthCache {
  const entries = new Map<string, { principal: Principal; until: number }>();
  const inflight = new Map<string, Promise<Principal>>();
  return {
    async resolve(token, load) {
      const key = tokenKey(token);
      const now = clock.now().getTime();
      const hit = entries.get(key);
      if (hit && hit.until > now) return hit.principal;
      if (hit) entries.delete(key);
      const pending = inflight.get(key);
      if (pending) return await pending;
      const loading = load().then((principal) => {
        const expires = principal.expiresAt ? Number(principal.expiresAt.seconds) * 1000 : Infinity;
        const until = Math.min(clock.now().getTime() + MAX_TTL_MS, expires);
        // Oldest first out: Map iteration follows insertion order.
        if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
        entries.set(key, { principal, until });
        return principal;
      });
      inflight.set(key, loading);
      try {
        return await loading;
      } finally {
        inflight.delete(key);
      }
    },
  };
}

// RFC 6750 token68 characters; anything else cannot be one of our credentials.
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]{1,4096}=*) *$/i;

/** Resolves `Authorization: Bearer <token>` to a principal through identity, or answers 401. */
export function authenticate(ctx: GatewayContext): RequestHandler {
  return async (req, res, next) => {
    const header = req.get("authorization");
    if (header === undefined || header === "") throw invalidToken("missing bearer token", false);
    const match = BEARER.exec(header);
    if (!match) throw invalidToken("malformed Authorization header, expected: Bearer <token>", true);
    const token = match[1];
    const principal = await ctx.authCache.resolve(token, async () => {
      const { principal } = await ctx.identity.authenticate({ bearer: token });
      if (!principal) throw new Error("identity answered Authenticate without a principal");
      return principal;
    });
    res.locals.principal = principal;
    next();
  };
}

/** Lets the request through only when the principal's effective permissions include `permission`. */
export function requirePermission(permission: Permission): RequestHandler {
  return (_req, res, next) => {
    if (!res.locals.principal?.permissions.includes(permission)) throw insufficientPermissions(permission);
    next();
  };
}
