/**
 * The web console's files served by the real gateway app (console/dist, built
 * by `npm install` / `npm test` before this runs): index.html at / and at
 * the console's routes, hashed assets under /console-assets/, all with the
 * pages' Content-Security-Policy; everything else still reaches the API.
 */
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_DIST, consolePages } from "../src/console.ts";
import { PAGE_POLICY } from "../src/pages/pages.ts";
import { startGateway, type TestGateway } from "./support/gateway.ts";
import { startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error("console/dist is missing: run `npm run build:console` first");
  stubs = await startStubs();
  gw = await startGateway(stubs);
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

const get = (path: string, init: RequestInit = {}) => fetch(gw.url + path, init);

describe("the console's files", () => {
  it.each([
    ["/", "no-cache"],
    ["/login", "no-cache"],
    ["/databases", "no-cache"],
    ["/databases/db-abc/backups", "no-cache"],
    ["/billing", "no-cache"],
    ["/organization", "no-cache"],
    // Opened from an invitation mail with its one-time token in the address: never kept.
    ["/join?token=dbi_x", "no-store"],
  ])("%s is the console's index.html, with the pages' CSP; Cache-Control %s", async (path, cache) => {
    const res = await get(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toBe(PAGE_POLICY);
    expect(res.headers.get("cache-control")).toBe(cache);
    const html = await res.text();
    // Every script is a file of this origin: nothing inline for the CSP to have to allow.
    const scripts = [...html.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1]!);
    expect(scripts.length).toBeGreaterThan(0);
    for (const attrs of scripts) expect(attrs).toMatch(/src="\/console-assets\/[\w.-]+\.js"/);
  });

  it("its hashed assets are kept a year, and gzipped for a client that takes gzip", async () => {
    const names = readdirSync(join(CONSOLE_DIST, "console-assets"));
    const js = names.find((n) => n.endsWith(".js"))!;
    const res = await get(`/console-assets/${js}`, { headers: { "accept-encoding": "gzip" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(res.headers.get("content-security-policy")).toBe(PAGE_POLICY);
    // fetch decodes gzip itself: ask for the raw bytes over a plain request to see the encoding.
    expect(res.headers.get("content-encoding")).toBe("gzip");
    expect((await res.text()).length).toBeGreaterThan(1000);
  });

  it("a file that is not one of the build's is the API's 404, and no path reaches outside the build", async () => {
    for (const path of ["/console-assets/nope.js", "/console-assets/..%2Findex.html", "/console-assets/%2e%2e/%2e%2e/package.json"]) {
      const res = await get(path);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("resource_not_found");
    }
  });

  it("only GET and HEAD: another method on a console route is 405 with Allow", async () => {
    const res = await get("/databases", { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });

  it("the API and the other pages keep their paths", async () => {
    const api = await get("/v1/databases");
    expect(api.status).toBe(401);
    expect(api.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
    expect((await get("/docs")).status).toBe(200);
    expect((await get("/nothing-here")).status).toBe(404);
  });
});

describe("without a build", () => {
  it("a console route says how to build it (503), instead of a blank page", async () => {
    const app = express();
    app.use(consolePages(mkdtempSync(join(tmpdir(), "console-missing-"))));
    const server = app.listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/databases`);
      expect(res.status).toBe(503);
      expect(await res.text()).toContain("npm install");
    } finally {
      server.close();
    }
  });
});
