import http2 from "node:http2";
import { connect, type AddressInfo } from "node:net";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMAND_TIMEOUT_MS } from "../src/redis.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { inspector, startRelay, uniquePrefix } from "./support/redis.ts";
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

async function gateway(upstreams: Partial<Pick<Stubs, "identityUrl" | "databasesUrl" | "billingUrl">>, env: Record<string, string> = {}) {
  const log = captureLog();
  const gw = await startGateway(
    { ...stubs, ...upstreams },
    { UPSTREAM_TIMEOUT_MS: "60000", REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), ...env },
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

  it("concurrent /healthz share one probe, reused for about a second", async () => {
    const { gw } = await gateway({});
    // Billing's step of the probe (a GetUsage of an id no organization has) is one call per probe, not coalesced.
    const probes = () =>
      (stubs.state.seen.get("getUsage") ?? []).filter((r) => (r as { organizationId: string }).organizationId === "healthz-probe").length;
    const before = probes();
    const answers = await Promise.all(Array.from({ length: 10 }, () => api(gw.url, "/healthz")));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(probes() - before).toBe(1);
    // Once the second is over, the next /healthz probes again.
    await expect
      .poll(
        async () => {
          await api(gw.url, "/healthz");
          return probes() - before;
        },
        { timeout: 30_000, interval: 200 },
      )
      .toBe(2);
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

/**
 * One HTTP/1.1 request written by hand on its own connection: the head and `bodyStart`, then nothing more (the
 * connection is left open, so the gateway sees a client that stalls, not one that hung up). Resolves with the
 * answer once it arrived in full.
 */
function stalledRequest(base: string, head: string[], bodyStart: string) {
  const { hostname, port } = new URL(base);
  return new Promise<{ status: number; headers: Record<string, string>; body: any; socket: ReturnType<typeof connect> }>(
    (resolve, reject) => {
      const socket = connect(Number(port), hostname);
      let received = Buffer.alloc(0);
      socket.on("error", reject);
      socket.on("data", (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const end = received.indexOf("\r\n\r\n");
        if (end < 0) return;
        const [statusLine, ...lines] = received.subarray(0, end).toString("latin1").split("\r\n");
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
        );
        const body = received.subarray(end + 4);
        if (body.length < Number(headers["content-length"] ?? 0)) return;
        resolve({ status: Number(statusLine!.split(" ")[1]), headers, body: JSON.parse(body.toString("utf8")), socket });
      });
      socket.write(`${head.join("\r\n")}\r\n\r\n${bodyStart}`);
    },
  );
}

describe("503 with Retry-After while the request waits on anything but an upstream", () => {
  it("a client that stalls its body: 503 service_unavailable, Retry-After 1, the envelope, stage body", async () => {
    const { gw, log } = await gateway({});
    const started = performance.now();
    const res = await stalledRequest(
      gw.url,
      [
        "POST /v1/databases HTTP/1.1",
        "Host: gateway.test",
        `Authorization: Bearer ${TOKEN}`,
        "Content-Type: application/json",
        "Content-Length: 200",
      ],
      '{"name": "half-a-bo',
    );
    const took = performance.now() - started;
    res.socket.destroy();
    expect([res.status, res.body.error.code]).toEqual([503, "service_unavailable"]);
    expect(res.headers["retry-after"]).toBe("1");
    expect(res.body).toEqual({
      error: {
        code: "service_unavailable",
        message: `the request could not be completed within ${REQUEST_TIMEOUT_MS / 1000} s`,
        details: [],
      },
      meta: { request_id: res.headers["x-request-id"] },
    });
    // Counted before the body was read: the answer carries the organization's window.
    expect(res.headers["x-ratelimit-limit"]).toBeDefined();
    expect(took).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(15_000);
    expect(log.lines.find((l) => l.msg === "request deadline passed")?.fields).toMatchObject({
      request_id: res.headers["x-request-id"],
      method: "POST",
      path: "/v1/databases",
      stage: "body",
      organization_id: "org-deadline",
    });
    // Nothing was asked of the databases service for it.
    expect(stubs.state.databases.size).toBe(0);
  }, 60_000);

  it("a Redis that stops answering while the rate limiter waits on it: 503 with Retry-After, stage rate-limit", async () => {
    // The deadline must pass before the Redis command's own (COMMAND_TIMEOUT_MS), after which the local limiter decides.
    const deadlineMs = Math.floor(COMMAND_TIMEOUT_MS / 3);
    const relay = await startRelay();
    const prefix = uniquePrefix();
    const { gw, log } = await gateway({}, { REDIS_URL: relay.url, REDIS_KEY_PREFIX: prefix, REQUEST_TIMEOUT_MS: String(deadlineMs) });
    await expect.poll(() => gw.ctx.redisHealth(), { timeout: 30_000 }).toBe("ok");
    relay.stall();
    try {
      const started = performance.now();
      // A public route: nothing but the per-IP limiter stands before the body.
      const res = await api(gw.url, "/v1/auth/token", {
        method: "POST",
        body: { email: "taken@example.com", password: "correct horse" },
        conform: false,
      });
      const took = performance.now() - started;
      expect([res.status, res.body.error.code], res.text).toEqual([503, "service_unavailable"]);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(res.body.meta.request_id).toBe(res.headers.get("x-request-id"));
      // Answered by the deadline, not by the request that Redis's own timeout let through: the deadline's answer
      // waits for the limiter's headers (at most COMMAND_TIMEOUT_MS on this Redis), and the late 200 is dropped.
      expect(took).toBeGreaterThanOrEqual(deadlineMs - 50);
      expect(took).toBeLessThan(15_000);
      expect(log.lines.find((l) => l.msg === "request deadline passed")?.fields).toMatchObject({
        path: "/v1/auth/token",
        stage: "rate-limit",
        deadline_ms: deadlineMs,
      });
    } finally {
      relay.resume();
      await relay.cut();
      const redis = await inspector();
      await redis.drop(prefix);
      redis.close();
    }
  }, 60_000);
});
