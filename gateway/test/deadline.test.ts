import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

/**
 * Issue #26: no public request may hang, whatever hangs behind it. An
 * upstream that accepts calls and never answers them (a wedged process) is
 * played by a real HTTP/2 server that takes every stream and says nothing.
 * The gateway's per-call deadline is set far beyond the request deadline, so
 * only the request deadline can answer in time.
 */
const TOKEN = "tok-deadline";
const REQUEST_TIMEOUT_MS = 1_000;

let stubs: Stubs;
let stuck: http2.Http2Server;
let stuckUrl: string;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-deadline", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stuck = http2.createServer();
  // Every stream is taken and left unanswered (its /healthz too).
  stuck.on("stream", () => {});
  await new Promise<void>((r) => stuck.listen(0, "127.0.0.1", () => r()));
  stuckUrl = `http://127.0.0.1:${(stuck.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const gw of gateways) await gw.close();
  stuck.close();
  for (const s of stuckSessions) s.destroy();
  await stubs?.close();
});

const stuckSessions = new Set<http2.ServerHttp2Session>();

async function gateway(upstreams: Partial<Pick<Stubs, "identityUrl" | "databasesUrl" | "billingUrl">>) {
  const log = captureLog();
  const gw = await startGateway(
    { ...stubs, ...upstreams },
    { UPSTREAM_TIMEOUT_MS: "60000", REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) },
    undefined,
    log,
  );
  gateways.push(gw);
  return { gw, log };
}

describe("the request deadline", () => {
  beforeAll(() => {
    stuck.on("session", (s) => stuckSessions.add(s));
  });

  it("a read blocked on a stuck upstream is answered 504 within the deadline, and logged with where it waited", async () => {
    const { gw, log } = await gateway({ databasesUrl: stuckUrl });
    const started = performance.now();
    const res = await api(gw.url, "/v1/databases/db-1", { token: TOKEN });
    const took = performance.now() - started;
    expect([res.status, res.body.error.code]).toEqual([504, "upstream_timeout"]);
    expect(res.body.meta.request_id).toBe(res.headers.get("x-request-id"));
    // The deadline is 1 s; the upstream's own deadline (60 s) must not be what ends it. Generous for a loaded machine.
    expect(took).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(15_000);
    const line = log.lines.find((l) => l.msg === "request deadline passed");
    expect(line?.fields).toMatchObject({
      request_id: res.headers.get("x-request-id"),
      method: "GET",
      path: "/v1/databases/db-1",
      stage: "upstream databases.getDatabase",
      deadline_ms: REQUEST_TIMEOUT_MS,
      organization_id: "org-deadline",
    });
  }, 60_000);

  it("a write blocked on a stuck upstream is answered 504 too, and the same connection serves the next request", async () => {
    const { gw } = await gateway({ databasesUrl: stuckUrl });
    const res = await api(gw.url, "/v1/databases/db-1", { method: "PATCH", token: TOKEN, body: { name: "renamed" } });
    expect([res.status, res.body.error.code]).toEqual([504, "upstream_timeout"]);
    // The late failure of the abandoned call must not break anything: the gateway answers the next request.
    expect((await api(gw.url, "/v1/billing/usage", { token: TOKEN })).status).toBe(200);
  }, 60_000);

  it("a request blocked in authentication (identity stuck) is answered 504, stage auth", async () => {
    const { gw, log } = await gateway({ identityUrl: stuckUrl });
    const res = await api(gw.url, "/v1/databases", { token: TOKEN });
    expect([res.status, res.body.error.code]).toEqual([504, "upstream_timeout"]);
    expect(log.lines.find((l) => l.msg === "request deadline passed")?.fields.stage).toBe("auth");
  }, 60_000);
});

describe("/healthz", () => {
  it("is ok (200) while requests complete", async () => {
    const { gw } = await gateway({});
    const res = await api(gw.url, "/healthz");
    expect([res.status, res.body]).toEqual([200, { status: "ok", redis: "disabled", maintenance: false }]);
    expect((await api(gw.url, "/v1/databases", { token: TOKEN })).status).toBe(200);
  }, 60_000);

  it("reports the gateway unhealthy (503) while requests cannot complete, and names the step that hangs", async () => {
    const { gw } = await gateway({ databasesUrl: stuckUrl });
    const [health, request] = await Promise.all([api(gw.url, "/healthz"), api(gw.url, "/v1/databases", { token: TOKEN })]);
    expect(request.status).toBe(504);
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({
      status: "unhealthy",
      checks: { auth: "ok", rate_limit: "ok", databases: "hung", billing: "ok" },
      upstreams: { identity: "ok", databases: "unreachable", billing: "ok" },
    });
  }, 60_000);
});
