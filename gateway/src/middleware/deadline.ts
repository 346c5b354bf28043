import type { RequestHandler, Response } from "express";
import type { GatewayContext } from "../context.ts";
import { ApiError } from "../errors.ts";
import { sendError } from "./envelope.ts";
import { countFailure } from "./rate-limit.ts";
import "../locals.ts";

/**
 * Where a request is waiting, for the log line of one that missed its
 * deadline: `received`, `auth`, `rate-limit`, `body`, `idempotency`,
 * `upstream <service>.<method>` (the last internal call it started).
 */
export type Stage = string;

/** Sets where the request waits now. */
export function stage(res: Response, where: Stage): void {
  res.locals.stage = where;
}

const RETRY_AFTER_S = "1";

/**
 * The request deadline (REQUEST_TIMEOUT_MS, default 10 s): a request with no
 * answer by then gets one — 504 upstream_timeout while it waits on an
 * internal service (authentication included), 503 service_unavailable with
 * Retry-After while it waits on anything else (the rate limiter, the
 * idempotency store, the client's body) — and a warning is logged with the
 * stage it was waiting in. Whatever the request was doing goes on and its
 * late answer is dropped (sendReply writes nothing once the deadline passed,
 * errors go nowhere either, even while this answer still reads the rate-limit
 * headers); a write that completes later is recorded under its
 * Idempotency-Key as usual, so the client's retry gets its outcome. Every
 * answer of the API is one JSON message (invoice PDFs included), so no route
 * is exempt; /healthz bounds its own probe (health.ts).
 */
export function requestDeadline(ctx: GatewayContext): RequestHandler {
  const ms = ctx.config.requestTimeoutMs;
  return (req, res, next) => {
    // Health bounds its own probe; the metrics scrape reads this process only.
    if (req.path === "/healthz" || req.path === "/healthz/" || req.path === "/metrics") {
      next();
      return;
    }
    res.locals.stage = "received";
    const timer = setTimeout(async () => {
      if (res.headersSent || res.writableEnded) return;
      const where = res.locals.stage ?? "received";
      res.locals.deadlineMissed = true;
      ctx.log.warn("request deadline passed", {
        request_id: res.locals.requestId,
        method: req.method,
        path: req.path,
        stage: where,
        deadline_ms: ms,
        organization_id: res.locals.principal?.organizationId,
      });
      const upstream = where === "auth" || where.startsWith("upstream");
      const error = upstream
        ? new ApiError(504, "upstream_timeout", `an internal service did not answer within ${ms / 1000} s`)
        : new ApiError(503, "service_unavailable", `the request could not be completed within ${ms / 1000} s`, [], {
            "Retry-After": RETRY_AFTER_S,
          });
      // Every answer carries X-RateLimit-*: a request stuck before it was counted reports its IP's windows (not charged).
      await countFailure(ctx, req, res, error).catch(() => undefined);
      sendError(res, error);
    }, ms);
    res.once("close", () => clearTimeout(timer));
    next();
  };
}

/**
 * `client` as one request sees it: each call first records its stage
 * (`upstream databases.getDatabase`). A Proxy, so a request pays for the
 * methods it calls, not for every method of the service.
 */
export function stagedClient<C extends object>(client: C, service: string, res: Response): C {
  return new Proxy(client, {
    get(target, name) {
      const method = (target as Record<string | symbol, unknown>)[name];
      if (typeof method !== "function") return method;
      return (request: unknown, options: unknown) => {
        res.locals.stage = `upstream ${service}.${String(name)}`;
        return (method as (r: unknown, o: unknown) => unknown).call(target, request, options);
      };
    },
  });
}

/** The context a route handler gets: its upstream clients record the request's stage. */
export function stagedContext(ctx: GatewayContext, res: Response): GatewayContext {
  const staged = Object.create(ctx) as GatewayContext;
  staged.identity = stagedClient(ctx.identity, "identity", res);
  staged.databases = stagedClient(ctx.databases, "databases", res);
  staged.billing = stagedClient(ctx.billing, "billing", res);
  return staged;
}
