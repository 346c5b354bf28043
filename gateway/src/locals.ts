import type { Principal } from "@dbaas/proto/identity";
import type { Decision } from "./rate-limit/limiter.ts";

/** What the middleware chain records about a request on `res.locals`. */
declare global {
  namespace Express {
    interface Locals {
      requestId: string;
      /** Set by the auth middleware on routes that require a credential. */
      principal?: Principal;
      /** The limiter's decision for this request, reported in X-RateLimit-*: a request is counted once. */
      rateLimit?: Decision;
      /**
       * Set by the pages (`/docs` and its assets, the console's files): this
       * Content-Security-Policy replaces the API's, and the page sets its own Cache-Control.
       */
      pagePolicy?: string;
      /** Where the request waits now, for the log of one that misses its deadline (middleware/deadline.ts). */
      stage?: string;
      /** The deadline answered the request: whatever the pipeline answers later is dropped. */
      deadlineMissed?: boolean;
      /** The matched route's template (`/v1/databases/:id`): the label of its HTTP metrics. */
      route?: string;
    }
  }
}
