import type { Request, RequestHandler, Response } from "express";
import type { Principal } from "@dbaas/proto/identity";
import type { GatewayContext } from "../context.ts";
import { insufficientPermissions, rateLimited, type ApiError } from "../errors.ts";
import { ipWindows, planWindows, type Decision } from "../rate-limit/limiter.ts";
import { principalPlan } from "../routes/mappers.ts";
import type { Permission } from "../routes/route.ts";
import { hasPermission } from "./auth.ts";
import { sendReply, type Reply } from "./envelope.ts";
import "../locals.ts";

/** The decision goes out in the X-RateLimit-* headers of whatever answer the request gets (see security-headers.ts). */
function setHeaders(res: Response, d: Decision): void {
  res.locals.rateLimit = d;
}

function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? "unknown";
}

/**
 * Counts the request against the client IP's windows. Returns the 429 to send
 * instead of the response when they are exhausted.
 */
export async function countByIp(ctx: GatewayContext, req: Request, res: Response): Promise<ApiError | undefined> {
  if (res.locals.rateLimit) return undefined;
  const windows = ipWindows(ctx.config.ipLimitPerMinute, ctx.config.ipLimitPerDay);
  res.locals.stage = "rate-limit";
  const decision = await ctx.limiter.consume(`ip:${clientIp(req)}`, windows);
  setHeaders(res, decision);
  return decision.allowed ? undefined : rateLimited(decision.retryAfter);
}

/** Failures that are ours, not the client's: an upstream (or its database) down or slow, a bug. */
const OUR_FAILURES: ReadonlySet<ApiError["code"]> = new Set(["service_unavailable", "upstream_timeout", "internal_error"]);

/**
 * For a request that failed before any limiter counted it (a bad token, an
 * unknown route, a malformed body): counts it against the client IP, so
 * guessing tokens costs budget. Not when the failure is ours — identity
 * unreachable while authenticating, say: the caller, whose organization is
 * unknown then, would pay our outage out of its IP budget and meet 429s on a
 * plan no request reaches the limit of. It gets the 503 instead.
 */
export async function countFailure(ctx: GatewayContext, req: Request, res: Response, error: ApiError): Promise<ApiError | undefined> {
  if (!OUR_FAILURES.has(error.code)) return await countByIp(ctx, req, res);
  // Every response carries the X-RateLimit-* headers: the IP's windows as they stand.
  if (!res.locals.rateLimit && ctx.limiter.peek) {
    setHeaders(res, await ctx.limiter.peek(`ip:${clientIp(req)}`, ipWindows(ctx.config.ipLimitPerMinute, ctx.config.ipLimitPerDay)));
  }
  return undefined;
}

/** For routes without a credential: limited per client IP. */
export function limitByIp(ctx: GatewayContext): RequestHandler {
  return async (req, res, next) => {
    const refused = await countByIp(ctx, req, res);
    if (refused) throw refused;
    next();
  };
}

/** Organizations remembered; the oldest is forgotten first. */
const HEADROOM_ENTRIES = 10_000;

/**
 * Which organizations this process last saw with plenty of their rate limit
 * left (a tenth of the window or more): their reads need not wait for the
 * limiter to start. An organization not seen yet, or seen close to or over
 * its limit, waits, so a client hammering past its limit cannot make the
 * gateway read for it.
 */
export interface Headroom {
  roomy(organizationId: string): boolean;
  record(organizationId: string, decision: Decision): void;
}

export function createHeadroom(): Headroom {
  const roomy = new Map<string, boolean>();
  return {
    roomy: (organizationId) => roomy.get(organizationId) === true,
    record(organizationId, d) {
      const ample = d.allowed && d.remaining >= d.limit / 10;
      if (roomy.get(organizationId) === ample) return;
      roomy.delete(organizationId);
      if (roomy.size >= HEADROOM_ENTRIES) roomy.delete(roomy.keys().next().value!);
      roomy.set(organizationId, ample);
    },
  };
}

async function countOrganization(ctx: GatewayContext, headroom: Headroom, res: Response, principal: Principal): Promise<Decision> {
  res.locals.stage = "rate-limit";
  const decision = await ctx.limiter.consume(`org:${principal.organizationId}`, planWindows(principalPlan(principal) ?? "free"));
  headroom.record(principal.organizationId, decision);
  return decision;
}

/** For authenticated routes: limited per organization, by its plan. Runs after `authenticate`. */
export function limitByOrganization(ctx: GatewayContext, headroom: Headroom): RequestHandler {
  return async (_req, res, next) => {
    const decision = await countOrganization(ctx, headroom, res, res.locals.principal!);
    setHeaders(res, decision);
    if (!decision.allowed) throw rateLimited(decision.retryAfter);
    next();
  };
}

/**
 * For authenticated reads: limitByOrganization, requirePermission and the
 * read itself, with the read started while the limiter's round trip is under
 * way when the organization has headroom. Nothing is sent before the
 * limiter has decided, and what is sent is exactly what the steps one after
 * another would send: 429 when refused (a speculative read's result or error
 * is dropped), then 403 without the permission, then the read's reply or
 * error. A read changes nothing, so one done for a request that is then
 * refused costs only the work.
 */
export function limitAlongside(
  ctx: GatewayContext,
  headroom: Headroom,
  permission: Permission,
  read: (req: Request, res: Response) => Promise<Reply>,
): RequestHandler {
  return async (req, res) => {
    const principal = res.locals.principal!;
    const permitted = hasPermission(principal, permission);
    const decided = countOrganization(ctx, headroom, res, principal);
    let early: Promise<Reply> | undefined;
    if (permitted && headroom.roomy(principal.organizationId)) {
      early = read(req, res);
      // Observed below once the request is allowed; until then a rejection must not count as unhandled.
      early.catch(() => {});
    }
    const decision = await decided;
    setHeaders(res, decision);
    if (!decision.allowed) throw rateLimited(decision.retryAfter);
    if (!permitted) throw insufficientPermissions(permission);
    sendReply(res, await (early ?? read(req, res)));
  };
}
