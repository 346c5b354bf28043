import type { RequestHandler } from "express";
import type { Client } from "@connectrpc/connect";
import type { Scope } from "@dbaas/catalogue";
import type { IdentityService, Principal } from "@dbaas/proto/identity";
import type { AuthCache } from "../auth/principal-cache.ts";
import { insufficientPermissions, invalidToken } from "../errors.ts";
import "../locals.ts";

/**
 * The Express side of authentication. What it needs of the gateway's
 * context, named here rather than imported, so this module does not depend
 * on the context that builds the cache (src/auth/principal-cache.ts) and the
 * revocation feed keeping it honest (src/auth/revocation-feed.ts).
 */
export interface AuthDeps {
  authCache: AuthCache;
  identity: Pick<Client<typeof IdentityService>, "authenticate">;
}

// RFC 6750 token68 characters; anything else cannot be one of our credentials.
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]{1,4096}=*) *$/i;

/** Resolves `Authorization: Bearer <token>` to a principal through identity (and the cache), or answers 401. */
export function authenticate(deps: AuthDeps): RequestHandler {
  return async (req, res, next) => {
    const header = req.get("authorization");
    if (header === undefined || header === "") throw invalidToken("missing bearer token", false);
    const match = BEARER.exec(header);
    if (!match) throw invalidToken("malformed Authorization header, expected: Bearer <token>", true);
    const token = match[1]!;
    res.locals.stage = "auth";
    const principal = await deps.authCache.resolve(token, async () => {
      const { principal } = await deps.identity.authenticate({ bearer: token });
      if (!principal) throw new Error("identity answered Authenticate without a principal");
      return principal;
    });
    res.locals.principal = principal;
    next();
  };
}

/** Whether the principal's effective permissions include `permission`. */
export const hasPermission = (principal: Principal, permission: Scope): boolean => principal.permissions.includes(permission);

/** Lets the request through only when the principal's effective permissions include `permission`. */
export function requirePermission(permission: Scope): RequestHandler {
  return (_req, res, next) => {
    if (!res.locals.principal || !hasPermission(res.locals.principal, permission)) throw insufficientPermissions(permission);
    next();
  };
}
