import { ServerResponse } from "node:http";
import type { Express, Response } from "express";
import "../locals.ts";

/**
 * Headers for an API that serves JSON only: nothing is to be sniffed, framed,
 * cached (responses carry credentials) or leak a referrer. HSTS only when the
 * public URL is https: over plain http it would be ignored anyway.
 */
export function securityHeaders(publicBaseUrl: string): string[] {
  const headers = [
    ["X-Content-Type-Options", "nosniff"],
    ["X-Frame-Options", "DENY"],
    ["Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"],
    ["Referrer-Policy", "no-referrer"],
    ["Cross-Origin-Opener-Policy", "same-origin"],
    ["Cache-Control", "no-store"],
  ];
  if (publicBaseUrl.startsWith("https://")) headers.push(["Strict-Transport-Security", "max-age=31536000; includeSubDomains"]);
  return headers.flat();
}

/** The fixed headers for a page: its own CSP instead of the API's, and no Cache-Control (the page sets one). */
function pageHeaders(fixed: string[], policy: string): string[] {
  const list: string[] = [];
  for (let i = 0; i < fixed.length; i += 2) {
    if (fixed[i] === "Cache-Control") continue;
    list.push(fixed[i]!, fixed[i] === "Content-Security-Policy" ? policy : fixed[i + 1]!);
  }
  return list;
}

type Headers = Parameters<ServerResponse["writeHead"]>[1];

/**
 * Adds the headers every response of the gateway carries — the security
 * headers, `X-Request-Id` and the `X-RateLimit-*` of the request's decision —
 * where Node writes the response head, which every way of answering goes
 * through (Express's send and json, a bare end, the envelope's writeHead):
 * no response can leave without them, and none of them costs a `setHeader`
 * (a validation, a lower-casing and a map entry each) on the way.
 *
 * Installed on the app's response prototype, Express's own extension point.
 * Pages (`res.locals.pagePolicy`) get the same headers with their own CSP.
 */
export function stampResponses(app: Express, publicBaseUrl: string): void {
  const fixed = securityHeaders(publicBaseUrl);
  const writeHead = ServerResponse.prototype.writeHead as (this: ServerResponse, statusCode: number, ...rest: unknown[]) => ServerResponse;
  (app.response as Response).writeHead = function (this: Response, statusCode: number, reason?: string | Headers, headers?: Headers) {
    if (typeof reason !== "string") {
      headers = reason;
      reason = undefined;
    }
    const { requestId, rateLimit, pagePolicy } = this.locals;
    const list = pagePolicy === undefined ? [...fixed] : pageHeaders(fixed, pagePolicy);
    if (requestId !== undefined) list.push("X-Request-Id", requestId);
    if (rateLimit !== undefined) {
      list.push(
        "X-RateLimit-Limit",
        String(rateLimit.limit),
        "X-RateLimit-Remaining",
        String(rateLimit.remaining),
        "X-RateLimit-Reset",
        String(rateLimit.reset),
      );
    }
    if (Array.isArray(headers)) list.push(...(headers as string[]));
    else if (headers) for (const [name, value] of Object.entries(headers)) if (value !== undefined) list.push(name, String(value));
    return reason === undefined ? writeHead.call(this, statusCode, list) : writeHead.call(this, statusCode, reason, list);
  } as Response["writeHead"];
}
