import type { Principal } from "@dbaas/proto/identity";

/** What the middleware chain records about a request on `res.locals`. */
declare global {
  namespace Express {
    interface Locals {
      requestId: string;
      /** Set by the auth middleware on routes that require a credential. */
      principal?: Principal;
      /** Set once the X-RateLimit-* headers are on the response: a request is counted once. */
      rateLimited?: boolean;
    }
  }
}

export {};
