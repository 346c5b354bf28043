/**
 * GET /metrics on the gateway's port: HTTP metrics by route template (never
 * the raw path), the limiter's degraded gauge, and only for scrapers inside
 * the network (no proxy in between), outside /v1.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { REDIS_URL } from "./support/redis.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

const TOKEN = "tok-prometheus";

let stubs: Stubs;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-prom", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await stubs?.close();
});

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startGateway(stubs, env);
  gateways.push(gw);
  return gw;
}

/** The value of one sample line, or undefined when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m?.[1] === name && want.every((w) => (m[2] ?? "").split(",").includes(w))) return Number(m[3]);
  }
  return undefined;
}

async function scrape(gw: TestGateway): Promise<string> {
  const res = await fetch(`${gw.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return await res.text();
}

describe("the gateway's /metrics", () => {
  it("counts responses by route template, method and status, and times them", async () => {
    const gw = await gateway();
    for (let i = 0; i < 2; i++) expect((await api(gw.url, "/v1/databases", { token: TOKEN })).status).toBe(200);
    expect((await api(gw.url, "/v1/databases/db-nope1", { token: TOKEN })).status).toBe(404);
    expect((await api(gw.url, "/v1/databases/db-nope2", { token: TOKEN })).status).toBe(404);
    expect((await api(gw.url, "/v1/nowhere/at-all")).status).toBe(404);
    const text = await scrape(gw);
    expect(sample(text, "http_requests_total", { method: "GET", route: "/v1/databases", status: "200" })).toBe(2);
    expect(sample(text, "http_requests_total", { method: "GET", route: "/v1/databases/:id", status: "404" })).toBe(2);
    expect(sample(text, "http_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(1);
    expect(sample(text, "http_request_duration_seconds_count", { method: "GET", route: "/v1/databases" })).toBe(2);
    // Raw paths (ids, unknown paths) never become label values.
    expect(text).not.toContain("db-nope");
    expect(text).not.toContain("nowhere");
    // No Redis configured: the limits are this gateway's alone.
    expect(sample(text, "rate_limiter_degraded", {})).toBe(1);
  });

  it("is refused (404, as an unknown endpoint) to a request relayed by a proxy, and is not under /v1", async () => {
    const gw = await gateway();
    const relayed = await api(gw.url, "/metrics", { headers: { "x-forwarded-for": "203.0.113.9" } });
    expect(relayed.status).toBe(404);
    expect(relayed.body.error.code).toBe("resource_not_found");
    expect((await api(gw.url, "/metrics", { headers: { forwarded: "for=203.0.113.9" } })).status).toBe(404);
    expect((await api(gw.url, "/v1/metrics")).status).toBe(404);
    expect((await fetch(`${gw.url}/metrics`)).status).toBe(200);
  });

  it("reads rate_limiter_degraded 0 while Redis serves the limits", async () => {
    const gw = await gateway({ REDIS_URL });
    for (let i = 0; i < 50 && gw.ctx.redisHealth() !== "ok"; i++) await new Promise((r) => setTimeout(r, 100));
    expect(gw.ctx.redisHealth()).toBe("ok");
    expect(sample(await scrape(gw), "rate_limiter_degraded", {})).toBe(0);
  });
});
