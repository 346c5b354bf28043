import { answerMetrics, Registry, tracingEnabled } from "@dbaas/kit";
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler, type Response } from "express";
import { consolePages } from "./console.ts";
import type { GatewayContext } from "./context.ts";
import { classify, maintenance, methodNotAllowed, routeNotFound } from "./errors.ts";
import { createHealth } from "./health.ts";
import { runIdempotent } from "./idempotency/idempotency.ts";
import { authenticate, requirePermission } from "./middleware/auth.ts";
import { parseJsonBody } from "./middleware/body.ts";
import { httpMetrics, markRoute, metricsAllowed } from "./middleware/prometheus.ts";
import { cors } from "./middleware/cors.ts";
import { requestDeadline, stagedContext } from "./middleware/deadline.ts";
import { sendError, sendReply, type Reply } from "./middleware/envelope.ts";
import { countFailure, createHeadroom, limitAlongside, limitByIp, limitByOrganization, type Headroom } from "./middleware/rate-limit.ts";
import { requestId } from "./middleware/request-id.ts";
import { stampResponses } from "./middleware/security-headers.ts";
import { series } from "./middleware/series.ts";
import { tracing } from "./middleware/tracing.ts";
import { pages } from "./pages/pages.ts";
import { createRouteTable, type RouteTable } from "./routes/match.ts";
import type { Route } from "./routes/route.ts";
import { ROUTES } from "./routes/table.ts";
import { validateRequest } from "./routes/validate.ts";
import "./locals.ts";

/** The route's handler on the validated request (once per Idempotency-Key): the reply to send. */
function execute(ctx: GatewayContext, route: Route): (req: Request, res: Response) => Promise<Reply> {
  return async (req, res) => {
    res.locals.stage = "handler";
    const call = { ctx: stagedContext(ctx, res), ...validateRequest(route, req) };
    const run = () => ("permission" in route ? route.handler({ ...call, principal: res.locals.principal! }) : route.handler(call));
    return await runIdempotent(ctx, req, res, run);
  };
}

function pipeline(ctx: GatewayContext, route: Route, headroom: Headroom): RequestHandler[] {
  const reply = execute(ctx, route);
  // Reads change nothing: they may start while the limiter decides (see limitAlongside).
  if ("permission" in route && route.method === "GET") {
    return [authenticate(ctx), limitAlongside(ctx, headroom, route.permission, reply)];
  }
  const steps: RequestHandler[] =
    "permission" in route ? [authenticate(ctx), limitByOrganization(ctx, headroom), requirePermission(route.permission)] : [limitByIp(ctx)];
  if (route.method === "POST" || route.method === "PUT" || route.method === "PATCH") steps.push(parseJsonBody);
  steps.push(async (req, res) => sendReply(res, await reply(req, res)));
  return steps;
}

/**
 * Everything after the preamble as one handler: health, metrics (to internal
 * scrapers only, outside /v1: middleware/prometheus.ts), the maintenance switch, then the route table — the matched route's pipeline, or 405 with
 * `Allow` for a known path and 404 for anything else. One handler rather
 * than one Express layer per route: Express would try each declared route's
 * pattern in turn on every request.
 */
function dispatch(ctx: GatewayContext, table: RouteTable<RequestHandler>, metrics: Registry): RequestHandler {
  const health = createHealth(ctx);
  return (req, res, next) => {
    const path = req.path;
    if ((path === "/healthz" || path === "/healthz/") && (req.method === "GET" || req.method === "HEAD")) {
      health().then(({ httpStatus, report }) => res.status(httpStatus).json(report), next);
      return;
    }
    if (path === "/metrics" && req.method === "GET" && metricsAllowed(req)) {
      answerMetrics(metrics, res);
      return;
    }
    // Outside /v1 (health) load balancers must still reach while the API is switched off.
    if (path === "/v1" || path.startsWith("/v1/")) {
      const state = ctx.maintenance.state();
      if (state.on) throw maintenance(state.retryAfter);
    }
    const match = table.match(req.method, path);
    if (match.kind === "none") throw routeNotFound();
    if (match.kind === "method") throw methodNotAllowed(match.allow);
    req.params = match.params;
    return match.value(req, res, next);
  };
}

/**
 * The last stop of every failure, Express's own included: it logs what the
 * client must not see, makes sure the response still carries rate-limit
 * headers (a request refused before it was counted is counted per client IP,
 * unless the failure is ours: see countFailure), and answers in the error envelope.
 */
function errorHandler(ctx: GatewayContext): ErrorRequestHandler {
  return async (err, req, res, next) => {
    if (res.locals.deadlineMissed) return;
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
    const refused = await countFailure(ctx, req, res, error).catch((limitErr: unknown) => {
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

/**
 * The gateway's HTTP surface, without listening: tests mount it on an ephemeral port.
 * `metrics`: the process's registry (main makes it with the default process metrics).
 */
export function createApp(ctx: GatewayContext, metrics: Registry = new Registry()): Express {
  const headroom = createHeadroom();
  const table = createRouteTable(
    ROUTES.map((route) => ({
      method: route.method,
      path: route.path,
      value: series([markRoute(route.path), ...pipeline(ctx, route, headroom)]),
    })),
  );
  const app = express();
  app.disable("x-powered-by");
  // Every response body carries a fresh request id, so ETags would never match.
  app.disable("etag");
  app.set("trust proxy", ctx.config.trustProxyHops);
  stampResponses(app, ctx.config.publicBaseUrl);
  // What every request goes through first, as one handler (see series.ts).
  app.use(
    series([
      httpMetrics(ctx, metrics),
      ...(tracingEnabled() ? [tracing()] : []),
      requestId(),
      requestDeadline(ctx),
      // Not even installed when it would log nothing: it costs a listener and a closure per request.
      ...(ctx.config.requestLog ? [accessLog(ctx)] : []),
      ...(ctx.config.corsOrigins.length > 0 ? [cors(ctx.config.corsOrigins, table.methodsOf)] : []),
      // /docs and its assets, the old invitation link's redirect (outside /v1): one map lookup for every other request.
      pages(),
      // The web console at / and its routes (console/): one Set lookup for every other request.
      consolePages(),
      dispatch(ctx, table, metrics),
    ]),
  );
  app.use(errorHandler(ctx));
  return app;
}
