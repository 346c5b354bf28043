/**
 * The gateway's pages outside /v1: GET /docs (Swagger UI from swagger-ui-dist,
 * served by the gateway itself), over HTTP and in headless Chromium; and the
 * older invitation link (`/invitations/accept?token=…`) redirected to the
 * console's join page, where the real identity service's mails now link (joining
 * there is console/test/browser.test.ts's).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Role } from "@dbaas/proto/identity";
import { launchBrowser, type Browser, type Page } from "@dbaas/test/support/browser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acceptsGzip, PAGE_POLICY } from "../src/pages/pages.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { PASSWORD, startRealIdentity, uniqueEmail, type RealIdentity } from "./support/identity.ts";
import { startStubs, type Stubs } from "./support/stubs.ts";

const SWAGGER_UI = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
const API_POLICY = "default-src 'none'; frame-ancestors 'none'";

let stubs: Stubs;
let identity: RealIdentity;
let gw: TestGateway;
let browser: Browser;

beforeAll(async () => {
  stubs = await startStubs();
  identity = await startRealIdentity(stubs);
  gw = await startGateway({ ...stubs, identityUrl: identity.url });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await identity?.close();
  await stubs?.close();
});

const get = (path: string, headers: Record<string, string> = {}, method = "GET") => fetch(gw.url + path, { method, headers });

describe("pages over HTTP", () => {
  it.each([
    ["/docs", "no-store"],
    ["/docs/", "no-store"],
    ["/assets/swagger-ui-bundle.js", "public, max-age=3600"],
  ])("%s carries the standard headers with the pages' CSP and its own Cache-Control", async (path, cache) => {
    const res = await get(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toBe(PAGE_POLICY);
    expect(res.headers.get("cache-control")).toBe(cache);
    expect(res.headers.get("x-request-id")).toMatch(/^req_[a-z0-9]{24}$/);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  });

  it("the pages' policy allows this origin only, and no inline script", () => {
    expect(PAGE_POLICY).toMatch(/^default-src 'none';/);
    expect(PAGE_POLICY).toContain("script-src 'self';");
    expect(PAGE_POLICY).not.toMatch(/unsafe|https?:|\*/);
  });

  it("/docs loads Swagger UI from this gateway, pointed at /v1/openapi.json; nothing from another origin", async () => {
    const html = await (await get("/docs")).text();
    expect(html).toContain('<script src="/assets/swagger-ui-bundle.js"></script>');
    expect(html).toContain('href="/assets/swagger-ui.css"');
    const script = await (await get("/assets/docs.js")).text();
    expect(script).toContain('url: "/v1/openapi.json"');
    expect(script).toContain("validatorUrl: null");
    for (const own of [html, script]) {
      expect(own).not.toMatch(/(src|href)="(https?:)?\/\//);
      expect(own).not.toMatch(/fetch\("https?:/);
    }
  });

  it("serves swagger-ui-dist's files byte for byte, gzipped when the client takes it", async () => {
    const original = readFileSync(join(SWAGGER_UI, "swagger-ui-bundle.js"));
    const plain = await get("/assets/swagger-ui-bundle.js", { "accept-encoding": "identity" });
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(plain.headers.get("vary")).toBe("Accept-Encoding");
    expect(Buffer.from(await plain.arrayBuffer()).equals(original)).toBe(true);

    // fetch would undo the encoding itself: read the raw bytes with node:http.
    const { request } = await import("node:http");
    const raw = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((done, fail) => {
      request(`${gw.url}/assets/swagger-ui-bundle.js`, { headers: { "accept-encoding": "br;q=1, gzip;q=0.8" } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => done({ headers: res.headers, body: Buffer.concat(chunks) }));
      })
        .on("error", fail)
        .end();
    });
    expect(raw.headers["content-encoding"]).toBe("gzip");
    expect(Number(raw.headers["content-length"])).toBe(raw.body.length);
    expect(raw.body.length).toBeLessThan(original.length / 2);
    expect(gunzipSync(raw.body).equals(original)).toBe(true);

    const css = await get("/assets/swagger-ui.css");
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
    const icon = await get("/assets/favicon-32x32.png", { "accept-encoding": "gzip" });
    expect(icon.headers.get("content-type")).toBe("image/png");
    expect(icon.headers.get("content-encoding")).toBeNull();
  });

  it("HEAD answers the headers without a body", async () => {
    const res = await get("/docs", {}, "HEAD");
    expect(res.status).toBe(200);
    expect(Number(res.headers.get("content-length"))).toBeGreaterThan(100);
    expect(await res.text()).toBe("");
  });

  it("another method is 405 in the API's error envelope, with the API's headers", async () => {
    const res = await api(gw.url, "/docs", { method: "POST", body: {} });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    expect(res.body.error.code).toBe("method_not_allowed");
    expect(res.headers.get("content-security-policy")).toBe(API_POLICY);
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  it("anything else under /docs or /assets is the API's 404, and /v1 keeps the API's CSP", async () => {
    for (const path of [
      "/docs/index.html",
      "/assets/swagger-ui-bundle.js.map",
      "/assets/../package.json",
      "/invitations",
      "/assets/invitation.js",
      "/assets/page.css",
    ]) {
      const res = await api(gw.url, path);
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe("resource_not_found");
    }
    const doc = await api(gw.url, "/v1/openapi.json");
    expect(doc.status).toBe(200);
    expect(doc.headers.get("content-security-policy")).toBe(API_POLICY);
  });

  it("Accept-Encoding: gzip unless refused with q=0", () => {
    expect(acceptsGzip("gzip, deflate, br")).toBe(true);
    expect(acceptsGzip("br;q=1.0, gzip;q=0.5")).toBe(true);
    expect(acceptsGzip("*")).toBe(true);
    expect(acceptsGzip(undefined)).toBe(false);
    expect(acceptsGzip("identity")).toBe(false);
    expect(acceptsGzip("gzip;q=0")).toBe(false);
    expect(acceptsGzip("br, gzip;q=0.000")).toBe(false);
  });
});

/** Opens `path` on the gateway in a new tab. */
async function open(path: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(gw.url + path);
  return page;
}

/** Every request the page made went to the gateway (nothing from a CDN or a validator); data: URIs are inline. */
function expectSameOrigin(page: Page) {
  const fetched = page.requests.filter((url) => !url.startsWith("data:"));
  expect(fetched.length).toBeGreaterThan(0);
  for (const url of fetched) expect(new URL(url).origin, url).toBe(gw.url);
}

describe("in Chromium", () => {
  it("/docs renders the OpenAPI document: operations, summaries; no CSP violation, nothing from elsewhere", async () => {
    const page = await open("/docs");
    await page.waitFor(`!!document.querySelector(".opblock-summary-path[data-path='/v1/databases']")`, "the /v1/databases operation");
    const text = await page.evaluate<string>("document.body.innerText");
    expect(text).toContain("Create a database; the response carries its password, shown this once.");
    expect(text).toContain("/v1/invitations/accept");
    const paths = await page.evaluate<string[]>(
      `[...new Set([...document.querySelectorAll(".opblock-summary-path")].map((e) => e.dataset.path))]`,
    );
    expect(paths.length).toBeGreaterThan(20);
    expect(page.requests).toContain(`${gw.url}/v1/openapi.json`);
    expectSameOrigin(page);
    expect(page.problems).toEqual([]);
  });
});

describe("the invitation link", () => {
  it("identity mails the console's join page; the older link is redirected there with its token, kept by no cache", async () => {
    const owner = await identity.client.signup({
      email: uniqueEmail("owner"),
      password: PASSWORD,
      name: "Owner",
      organizationName: "Pages Inc",
    });
    const email = uniqueEmail("invitee");
    await identity.client.createInvitation({
      organizationId: owner.organization!.id,
      actor: { userId: owner.user!.id, role: Role.OWNER },
      email,
      role: "developer",
    });
    const link = new URL(/https?:\/\/\S+/.exec(await waitForMail(email))![0]);
    expect(link.pathname).toBe("/join");
    expect(link.searchParams.get("token")).toMatch(/^dbi_[0-9A-Za-z]{43}$/);

    // A mail sent before the upgrade: the same token, at the console's page.
    const old = await fetch(`${gw.url}/invitations/accept${link.search}`, { redirect: "manual" });
    expect(old.status).toBe(302);
    expect(old.headers.get("location")).toBe(`/join${link.search}`);
    expect(old.headers.get("cache-control")).toBe("no-store");
    expect(old.headers.get("referrer-policy")).toBe("no-referrer");
    expect(old.headers.get("content-security-policy")).toBe(PAGE_POLICY);
    expect(await old.text()).toBe("");
    const bare = await fetch(`${gw.url}/invitations/accept`, { method: "HEAD", redirect: "manual" });
    expect(bare.status).toBe(302);
    expect(bare.headers.get("location")).toBe("/join");
    const post = await api(gw.url, "/invitations/accept", { method: "POST", body: {} });
    expect(post.status).toBe(405);
    expect(post.body.error.code).toBe("method_not_allowed");
  });
});

async function waitForMail(email: string): Promise<string> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const mail = identity.mails.findLast((m) => m.to === email);
    if (mail) return mail.text;
    if (Date.now() > deadline) throw new Error(`no mail to ${email}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
