import { BlockList } from "node:net";
import { Counter, Gauge, Histogram, type Registry } from "@dbaas/kit";
import type { Request, RequestHandler, Response } from "express";
import type { GatewayContext } from "../context.ts";

const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * `http_requests_total{method,route,status}` and
 * `http_request_duration_seconds{method,route}` for every response, by route
 * template (`/v1/databases/:id`, set by {@link markRoute}), never the raw path:
 * the pages' fixed paths, `/healthz` and `/metrics` are their own routes and
 * anything else is `unmatched`. Also `rate_limiter_degraded`: 1 while the limits
 * are counted by this gateway alone (Redis unusable, or not configured).
 */
export function httpMetrics(ctx: GatewayContext, registry: Registry): RequestHandler {
  const requests = new Counter({
    name: "http_requests_total",
    help: "HTTP responses sent, by method, route template and status",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "http_request_duration_seconds",
    help: "Time from a request's arrival to its response's last byte handed to the socket",
    labelNames: ["method", "route"] as const,
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: "rate_limiter_degraded",
    help: "1 while rate limits are counted by this gateway alone instead of in Redis",
    registers: [registry],
    collect() {
      this.set(ctx.redisHealth() === "ok" ? 0 : 1);
    },
  });
  return (req, res, next) => {
    const started = performance.now();
    res.once("finish", () => {
      const labels = { method: req.method, route: routeOf(req, res) };
      requests.inc({ ...labels, status: res.statusCode });
      duration.observe(labels, (performance.now() - started) / 1000);
    });
    next();
  };
}

function routeOf(req: Request, res: Response): string {
  if (res.locals.route !== undefined) return res.locals.route;
  // The pages answer a fixed set of paths.
  if (res.locals.pagePolicy !== undefined) return req.path;
  if (req.path === "/healthz" || req.path === "/metrics") return req.path;
  return "unmatched";
}

/** First step of a route's pipeline: the template its metrics are labelled with. */
export function markRoute(path: string): RequestHandler {
  return (_req, res, next) => {
    res.locals.route = path;
    next();
  };
}

const internal = new BlockList();
internal.addSubnet("127.0.0.0", 8, "ipv4");
internal.addSubnet("10.0.0.0", 8, "ipv4");
internal.addSubnet("172.16.0.0", 12, "ipv4");
internal.addSubnet("192.168.0.0", 16, "ipv4");
internal.addSubnet("169.254.0.0", 16, "ipv4");
internal.addAddress("::1", "ipv6");
internal.addSubnet("fc00::", 7, "ipv6");
internal.addSubnet("fe80::", 10, "ipv6");

/**
 * Whether GET /metrics may be answered: only to a scraper inside the network —
 * the connection's own peer (never X-Forwarded-For) on a loopback or private
 * address, and no proxy in between (a request relayed by the load balancer or
 * Ingress carries Forwarded / X-Forwarded-For). Everyone else gets the 404 of
 * an unknown endpoint. docs/decisions.md, "Prometheus".
 */
export function metricsAllowed(req: Request): boolean {
  if (req.headers["x-forwarded-for"] !== undefined || req.headers.forwarded !== undefined) return false;
  const peer = req.socket.remoteAddress;
  if (peer === undefined) return false;
  const v4 = peer.startsWith("::ffff:") ? peer.slice(7) : undefined;
  return v4 !== undefined ? internal.check(v4, "ipv4") : internal.check(peer, peer.includes(":") ? "ipv6" : "ipv4");
}
