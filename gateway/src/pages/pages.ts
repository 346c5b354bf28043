import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { Request, RequestHandler, Response } from "express";
import { methodNotAllowed } from "../errors.ts";
import "../locals.ts";

/**
 * The gateway's own page outside `/v1`: `GET /docs` (the OpenAPI document
 * rendered by Swagger UI, served from the swagger-ui-dist package, nothing
 * from a CDN). `GET /invitations/accept?token=…`, where invitation mails
 * linked before the console's join page did, redirects there (`/join?token=…`,
 * console.ts): an invitation mailed before an upgrade still opens a page that
 * takes it.
 */

const STATIC = join(dirname(fileURLToPath(import.meta.url)), "static");
const SWAGGER_UI = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

/**
 * Everything a page loads comes from this origin; scripts are files (no inline
 * script, no eval); images may be data: URIs (Swagger UI's stylesheet uses them).
 */
export const PAGE_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".png": "image/png",
};

// The pages' HTML: never kept (the redirect below answers a URL holding a one-time token).
const PAGE_CACHE = "no-store";
// Assets change only with a deploy; an hour's staleness at most after one.
const ASSET_CACHE = "public, max-age=3600";

export interface Asset {
  file: string;
  cache: string;
}

const ASSETS: Record<string, Asset> = {
  "/docs": { file: join(STATIC, "docs.html"), cache: PAGE_CACHE },
  "/docs/": { file: join(STATIC, "docs.html"), cache: PAGE_CACHE },
  "/assets/docs.js": { file: join(STATIC, "docs.js"), cache: ASSET_CACHE },
  "/assets/swagger-ui.css": { file: join(SWAGGER_UI, "swagger-ui.css"), cache: ASSET_CACHE },
  "/assets/swagger-ui-bundle.js": { file: join(SWAGGER_UI, "swagger-ui-bundle.js"), cache: ASSET_CACHE },
  "/assets/favicon-32x32.png": { file: join(SWAGGER_UI, "favicon-32x32.png"), cache: ASSET_CACHE },
};

/** Whether the client takes gzip (`Accept-Encoding`, a q of 0 refusing it). */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  for (const part of header.split(",")) {
    const [coding, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    if (coding !== "gzip" && coding !== "*") continue;
    const q = params.find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  }
  return false;
}

interface Loaded {
  type: string;
  body: Buffer;
  /** Text worth compressing: compressed once, on first demand. */
  gzipped?: () => Promise<Buffer>;
}

const gzipAsync = promisify(gzip);

/** Reads a file once (on its first request) and keeps it, with its gzip form once asked for. */
export function loader(file: string): () => Promise<Loaded> {
  let loaded: Promise<Loaded> | undefined;
  return () => {
    loaded ??= readFile(file).then((body) => {
      const type = TYPES[extname(file)] ?? "application/octet-stream";
      if (type.startsWith("image/") || body.length < 1024) return { type, body };
      let compressed: Promise<Buffer> | undefined;
      return { type, body, gzipped: () => (compressed ??= gzipAsync(body, { level: 9 })) };
    });
    return loaded.catch((err: unknown) => {
      loaded = undefined;
      throw err;
    });
  };
}

export async function send(req: Request, res: Response, asset: Asset, load: () => Promise<Loaded>): Promise<void> {
  const { type, body, gzipped } = await load();
  const headers = ["Content-Type", type, "Cache-Control", asset.cache];
  let out = body;
  if (gzipped !== undefined) {
    headers.push("Vary", "Accept-Encoding");
    if (acceptsGzip(req.headers["accept-encoding"])) {
      out = await gzipped();
      headers.push("Content-Encoding", "gzip");
    }
  }
  headers.push("Content-Length", String(out.length));
  res.locals.pagePolicy = PAGE_POLICY;
  res.writeHead(200, headers);
  // Node sends no body for HEAD by itself.
  res.end(out);
}

/** Where invitation mails linked before the console's join page (identity now links `/join?token=…`). */
export const OLD_INVITATION_PATH = "/invitations/accept";

/** Serves the pages and their assets; every other path goes on to the API. */
export function pages(): RequestHandler {
  const table = new Map(Object.entries(ASSETS).map(([path, asset]) => [path, { asset, load: loader(asset.file) }]));
  return (req, res, next) => {
    if (req.path === OLD_INVITATION_PATH) {
      if (req.method !== "GET" && req.method !== "HEAD") throw methodNotAllowed(["GET", "HEAD"]);
      // The query (the one-time token) goes along, re-encoded (nothing but ASCII reaches the header); no cache keeps the answer.
      const at = req.originalUrl.indexOf("?");
      const query = new URLSearchParams(at === -1 ? "" : req.originalUrl.slice(at + 1)).toString();
      res.locals.pagePolicy = PAGE_POLICY;
      res.writeHead(302, ["Location", `/join${query === "" ? "" : `?${query}`}`, "Cache-Control", PAGE_CACHE, "Content-Length", "0"]);
      res.end();
      return;
    }
    const page = table.get(req.path);
    if (page === undefined) return next();
    if (req.method !== "GET" && req.method !== "HEAD") throw methodNotAllowed(["GET", "HEAD"]);
    return send(req, res, page.asset, page.load);
  };
}
