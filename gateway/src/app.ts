import { tracingEnabled } from "@dbaas/kit";
import express, { type ErrorRequestHandler, type Express, type RequestHandler } from "express";
import type { GatewayContext } from "./context.ts";
import { classify, methodNotAllowed, routeNotFound } from "./errors.ts";
import { runIdempotent } from "./idempotency/idempotency.ts";
import { authenticate, requirePermission } from "./middleware/auth.ts";
import { parseJsonBody } from "./middleware/body.ts";
import { cors } from "./middleware/cors.ts";
import { sendError, sendReply } from "./middleware/envelope.ts";
import { refuseDuringMaintenance } from "./middleware/maintenance.ts";
import { countByIp, limitByIp, limitByOrganization } from "./middleware/rate-limit.ts";
import { requestId } from "./middleware/request-id.ts";
import { securityHeaders } from "./middleware/security-headers.ts";
import { series } from "./middleware/series.ts";
import { tracing } from "./middleware/tracing.ts";
import { methodsByPath } from "./routes/match.ts";
import type { Method, Route } from "./routes/route.ts";
import { ROUTES } from "./routes/table.ts";
import { parseQuery, validateBody } from "./schema.ts";
import "./locals.ts";

/**
 * Runs the route's handler on the validated request (once per Idempotency-Key)
 * and sends its reply in the envelope.
 */
function handle(ctx: GatewayContext, route: Route): RequestHandler {
  return async (req, res) => {
    const call = {
      ctx,
      params: req.params as Record<string, string>,
      query: route.query ? parseQuery(route.query, req.query as Record<string, unknown>) : {},
      body: route.body ? validateBody(route.body, req.body) : {},
    };
    const execute = () =>
      "permission" in route ? route.handler({ ...call, principal: res.locals.principal! }) : route.handler(call);
    sendReply(res, await runIdempotent(ctx, req, res, execute));
  };
}

function pipeline(ctx: GatewayContext, route: Route): RequestHandler[] {
  const steps: RequestHandler[] =
    "permission" in route
      ? [authenticate(ctx), limitByOrganization(ctx), requirePermission(route.permission)]
      : [limitByIp(ctx)];
  if (route.method === "POST" || route.method === "PATCH") steps.push(parseJsonBody);
  steps.push(handle(ctx, route));
  return steps;
}

/** Answers 405 with `Allow` for a known path, 404 for anything else. */
function unmatched(methodsOf: (path: string) => Method[]): RequestHandler {
  return (req) => {
    const allow: string[] = methodsOf(req.path);
    if (allow.length === 0) throw routeNotFound();
    if (allow.includes("GET")) allow.push("HEAD");
    throw methodNotAllowed(allow);
  };
}

/**
 * The last stop of every failure, Express's own included: it logs what the
 * client must not see, makes sure the response still carries rate-limit
 * headers (a request refused before it was counted is counted per client IP),
 * and answers in the error envelope.
 */
function errorHandler(ctx: GatewayContext): ErrorRequestHandler {
  return async (err, req, res, next) => {
    if (res.headersSent) {
      ctx.log.error("failed after the response started", { request_id: res.locals.requestId, error: err });
      next(err);
      return;
    }
    const { error, unexpected } = classify(err);
    if (unexpected) {
      ctx.log.error("request failed", {
        request_id: res.locals.requestId,
        method: req.method,
        path: req.path,
        error: err,
        stack: err instanceof Error ? err.stack : undefined,
      });
    }
    const refused = await countByIp(ctx, req, res).catch((limitErr: unknown) => {
      ctx.log.error("rate limiter failed", { error: limitErr });
      return undefined;
    });
    sendError(res, refused ?? error);
  };
}

function accessLog(ctx: GatewayContext): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    res.on("finish", () => {
      ctx.log.info("request", {
        request_id: res.locals.requestId,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        duration_ms: Math.round(performance.now() - started),
        organization_id: res.locals.principal?.organizationId,
      });
    });
    next();
  };
}

/** The gateway's HTTP surface, without listening: tests mount it on an ephemeral port. */
export function createApp(ctx: GatewayContext): Express {
  const methodsOf = methodsByPath(ROUTES);
  const app = express();
  app.disable("x-powered-by");
  // Every response body carries a fresh request id, so ETags would never match.
  app.disable("etag");
  app.set("case sensitive routing", true);
  app.set("trust proxy", ctx.config.trustProxyHops);
  // What every request goes through first, as one handler (see series.ts).
  app.use(
    series([
      ...(tracingEnabled() ? [tracing()] : []),
      requestId(),
      // Not even installed when it would log nothing: it costs a listener and a closure per request.
      ...(ctx.config.requestLog ? [accessLog(ctx)] : []),
      securityHeaders(ctx.config.publicBaseUrl),
      ...(ctx.config.corsOrigins.length > 0 ? [cors(ctx.config.corsOrigins, methodsOf)] : []),
    ]),
  );

  // Outside /v1 and its rate limits: load balancers poll it.
  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok", redis: ctx.redisHealth(), maintenance: ctx.maintenance.state().on });
  });
  app.use(refuseDuringMaintenance(ctx.maintenance));

  for (const route of ROUTES) {
    const method = route.method.toLowerCase() as "get" | "post" | "patch" | "delete";
    app[method](route.path, series(pipeline(ctx, route)));
  }
  app.use(unmatched(methodsOf));
  app.use(errorHandler(ctx));
  return app;
}
