import type { RequestHandler } from "express";
import type { Method } from "../routes/route.ts";

const EXPOSED = [
  "X-Request-Id",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "Retry-After",
  "Idempotent-Replayed",
  "WWW-Authenticate",
].join(", ");
const ALLOWED_HEADERS = "Authorization, Content-Type, Idempotency-Key, X-Request-Id";

/**
 * CORS for the origins of CORS_ORIGINS (`*` allows any: credentials are
 * bearer tokens, never cookies, so a wildcard exposes nothing ambient).
 * Preflights for known paths are answered here, uncounted by rate limits:
 * the browser sends them, not the client's code. An origin not on the list
 * gets no CORS headers, and the browser withholds the response.
 */
export function cors(origins: readonly string[], methodsOf: (path: string) => Method[]): RequestHandler {
  const any = origins.includes("*");
  return (req, res, next) => {
    if (origins.length === 0) return next();
    res.vary("Origin");
    const origin = req.get("origin");
    if (origin === undefined || !(any || origins.includes(origin))) return next();
    res.set("Access-Control-Allow-Origin", any ? "*" : origin);
    res.set("Access-Control-Expose-Headers", EXPOSED);
    const methods = methodsOf(req.path);
    if (req.method !== "OPTIONS" || !req.get("access-control-request-method") || methods.length === 0) return next();
    res.set({
      "Access-Control-Allow-Methods": methods.join(", "),
      "Access-Control-Allow-Headers": ALLOWED_HEADERS,
      "Access-Control-Max-Age": "600",
    });
    res.status(204).end();
  };
}
