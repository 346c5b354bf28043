import { existsSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { RequestHandler } from "express";
import { methodNotAllowed } from "./errors.ts";
import { type Asset, loader, PAGE_POLICY, send } from "./pages/pages.ts";
import "./locals.ts";

/**
 * The web console (console/, built by `npm install` into console/dist): its
 * index.html at `/` and at each of its own routes (the browser's router takes
 * it from there), and its hashed files under /console-assets/. Everything
 * else goes on to the API. Served with the pages' Content-Security-Policy
 * (scripts and styles from this origin only, no inline script).
 */

export const CONSOLE_DIST = resolve(dirname(fileURLToPath(import.meta.url)), "../../console/dist");

/** The console's routes (console/src/app.tsx): the first segment of every address it shows. */
const ROUTES = new Set(["", "login", "signup", "join", "databases", "members", "api-keys", "billing", "organization"]);

const ASSET_DIR = "/console-assets/";
// The HTML names the current build's files: never kept; the files are named by their content: kept a year.
const HTML_CACHE = "no-cache";
const ASSET_CACHE = "public, max-age=31536000, immutable";

export function consolePages(dist: string = CONSOLE_DIST): RequestHandler {
  const index: Asset = { file: join(dist, "index.html"), cache: HTML_CACHE };
  // /join is opened from an invitation mail with its one-time token in the address: that answer is never kept.
  const joinIndex: Asset = { ...index, cache: "no-store" };
  const loadIndex = loader(index.file);
  // The build's files, listed once: a request can only name one of them (no path from the URL reaches the disk).
  let assets: Map<string, { asset: Asset; load: ReturnType<typeof loader> }> | undefined;
  const assetTable = () => {
    if (assets) return assets;
    const dir = join(dist, "console-assets");
    const names = existsSync(dir) ? readdirSync(dir) : [];
    assets = new Map(names.map((name) => [name, { asset: { file: join(dir, name), cache: ASSET_CACHE }, load: loader(join(dir, name)) }]));
    return assets;
  };
  return (req, res, next) => {
    const path = req.path;
    let serve: (() => Promise<void>) | undefined;
    if (path.startsWith(ASSET_DIR)) {
      const found = assetTable().get(path.slice(ASSET_DIR.length));
      if (found) serve = () => send(req, res, found.asset, found.load);
    } else if (ROUTES.has(path.split("/")[1] ?? "")) {
      if (!existsSync(index.file)) {
        res.locals.pagePolicy = PAGE_POLICY;
        res.writeHead(503, ["Content-Type", "text/plain; charset=utf-8", "Cache-Control", "no-store"]);
        res.end("The console is not built: run `npm install` (or `npm run build -w console`).\n");
        return;
      }
      serve = () => send(req, res, path.split("/")[1] === "join" ? joinIndex : index, loadIndex);
    }
    if (serve === undefined) return next();
    if (req.method !== "GET" && req.method !== "HEAD") throw methodNotAllowed(["GET", "HEAD"]);
    return serve();
  };
}
