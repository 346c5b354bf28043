/**
 * The gateway's pages outside /v1: GET /docs (Swagger UI from swagger-ui-dist,
 * served by the gateway itself) and the invitation page the invitation mail
 * links to, over HTTP and in headless Chromium against the real identity service.
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
    ["/invitations/accept?token=dbi_x", "no-store"],
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
    for (const own of [html, script, await (await get("/invitations/accept")).text(), await (await get("/assets/invitation.js")).text()]) {
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
    for (const path of ["/docs/index.html", "/assets/swagger-ui-bundle.js.map", "/assets/../package.json", "/invitations"]) {
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

  it("the invitation page without a token says so and offers no form", async () => {
    const page = await open("/invitations/accept");
    const error = await page.waitFor<string>(
      `!document.getElementById("error").hidden && document.getElementById("error").innerText`,
      "the error",
    );
    expect(error).toContain("carries no invitation token");
    expect(await page.evaluate("document.getElementById('accept').hidden")).toBe(true);
    expect(page.problems).toEqual([]);
  });

  it("shows the API's error: an unknown token, then a password the API refuses with its field", async () => {
    const page = await open("/invitations/accept?token=dbi_0000000000000000000000000000000000");
    await page.type("#name", "Nobody");
    await page.type("#password", PASSWORD);
    await page.click("#join");
    const error = await page.waitFor<string>(
      `!document.getElementById("error").hidden && document.getElementById("error").innerText`,
      "the error",
    );
    expect(error).toMatch(/invitation/i);
    expect(error).toMatch(/not found/i);
    // The API's answer was a 404 in its envelope, shown as such (the browser logs the failed status).
    expect(page.problems.filter((p) => !p.includes("404"))).toEqual([]);
  });

  it("an invitee follows the mailed link, picks a name and password, joins, and can log in with them", async () => {
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
    const mail = await waitForMail(email);
    const link = new URL(/https?:\/\/\S+/.exec(mail)![0]);
    expect(link.pathname).toBe("/invitations/accept");
    const page = await open(link.pathname + link.search);

    // Too short a password first: the API's 422 and its field detail are shown; the form stays.
    await page.type("#name", "Grace Hopper");
    await page.type("#password", "short");
    await page.click("#join");
    const refused = await page.waitFor<string>(
      `!document.getElementById("error").hidden && document.getElementById("error").innerText`,
      "the 422",
    );
    expect(refused).toContain("password: must be at least 8 characters");

    await page.evaluate(`document.getElementById("password").value = ""`);
    await page.type("#password", "a-long-new-password");
    await page.click("#join");
    const token = await page.waitFor<string>(
      `!document.getElementById("done").hidden && document.getElementById("token").innerText`,
      "the welcome",
    );
    expect(token).toMatch(/^dbs_/);
    expect(await page.evaluate("document.getElementById('error').hidden")).toBe(true);
    expect(await page.evaluate("document.getElementById('organization').innerText")).toBe("Pages Inc");
    expect(await page.evaluate("document.getElementById('role').innerText")).toBe("developer");
    // The spent token left the address bar.
    expect(await page.evaluate("location.search")).toBe("");

    const me = await api(gw.url, "/v1/organization/members", { token });
    expect(me.status).toBe(200);
    const login = await api(gw.url, "/v1/auth/token", { method: "POST", body: { email, password: "a-long-new-password" } });
    expect(login.status).toBe(200);
    const members = await api(gw.url, "/v1/organization/members", { token: login.body.data.access_token });
    expect(members.body.data.members).toContainEqual(
      expect.objectContaining({ role: "developer", user: expect.objectContaining({ email, name: "Grace Hopper" }) }),
    );
    expectSameOrigin(page);
    expect(page.problems.filter((p) => !p.includes("422"))).toEqual([]);
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
