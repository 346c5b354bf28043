import type { Request, RequestHandler, Response } from "express";
import type { GatewayContext } from "../context.ts";
import { rateLimited, type ApiError } from "../errors.ts";
import { ipWindows, planWindows, type Decision } from "../rate-limit/limiter.ts";
import "../locals.ts";

function setHeaders(res: Response, d: Decision): void {
  res.setHeader("X-RateLimit-Limit", String(d.limit));
  res.setHeader("X-RateLimit-Remaining", String(d.remaining));
  res.setHeader("X-RateLimit-Reset", String(d.reset));
  res.locals.rateLimited = true;
}

function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? "unknown";
}

/**
 * Counts the request against the client IP's windows. Returns the 429 to send
 * instead of the response when they are exhausted.
 */
export async function countByIp(ctx: GatewayContext, req: Request, res: Response): Promise<ApiError | undefined> {
  if (res.locals.rateLimited) return undefined;
  const windows = ipWindows(ctx.config.ipLimitPerMinute, ctx.config.ipLimitPerDay);
  const decision = await ctx.limiter.consume(`ip:${clientIp(req)}`, windows);
  setHeaders(res, decision);
  return decision.allowed ? undefined : rateLimited(decision.retryAfter);
}

/** For routes without a credential: limited per client IP. */
export function limitByIp(ctx: GatewayContext): RequestHandler {
  return async (req, res, next) => {
    const refused = await countByIp(ctx, req, res);
    if (refused) throw refused;
    next();
  };
}

/** For authenticated routes: limited per organization, by its plan. Runs after `authenticate`. */
export function limitByOrganization(ctx: GatewayContext): RequestHandler {
  return async (_req, res, next) => {
    const principal = res.locals.principal!;
    const decision = await ctx.limiter.consume(`org:${principal.organizationId}`, planWindows(principal.plan));
    setHeaders(res, decision);
    if (!decision.allowed) throw rateLimited(decision.retryAfter);
    next();
  };
}
