import type { RequestHandler } from "express";

/**
 * Headers for an API that serves JSON only: nothing is to be sniffed, framed,
 * cached (responses carry credentials) or leak a referrer. HSTS only when the
 * public URL is https: over plain http it would be ignored anyway.
 */
export function securityHeaders(publicBaseUrl: string): RequestHandler {
  const headers: Record<string, string> = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
  };
  if (publicBaseUrl.startsWith("https://")) headers["Strict-Transport-Security"] = "max-age=31536000; includeSubDomains";
  const entries = Object.entries(headers);
  return (_req, res, next) => {
    for (const [name, value] of entries) res.setHeader(name, value);
    next();
  };
}
