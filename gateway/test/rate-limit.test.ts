import type { Clock } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLocalLimiter, decide, planWindows } from "../src/rate-limit/limiter.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

function fakeClock(iso: string) {
  let t = Date.parse(iso);
  const clock: Clock = { now: () => new Date(t) };
  return { clock, advance: (ms: number) => (t += ms) };
}

describe("decide", () => {
  const windows = [
    { limit: 60, seconds: 60 },
    { limit: 1000, seconds: 86_400 },
  ];
  const now = Date.parse("2025-03-01T12:00:30Z") / 1000;

  it("reports the window closest to exhaustion", () => {
    expect(decide(now, windows, [10, 20], true)).toMatchObject({ limit: 60, remaining: 50, reset: now + 30 });
    expect(decide(now, windows, [10, 995], true)).toMatchObject({
      limit: 1000,
      remaining: 5,
      reset: Date.parse("2025-03-02T00:00:00Z") / 1000,
    });
  });

  it("when refused, waits for the exhausted window that resets last", () => {
    const d = decide(now, windows, [60, 1000], false);
    expect(d).toMatchObject({ allowed: false, limit: 1000, remaining: 0 });
    expect(d.retryAfter).toBe(Date.parse("2025-03-02T00:00:00Z") / 1000 - now);
    expect(decide(now, windows, [60, 500], false)).toMatchObject({ limit: 60, retryAfter: 30 });
  });
});

describe("local limiter", () => {
  it("enforces both windows; refused requests are not counted", async () => {
    const { clock, advance } = fakeClock("2025-03-01T23:58:00Z");
    const limiter = createLocalLimiter(clock);
    const windows = [
      { limit: 2, seconds: 60 },
      { limit: 3, seconds: 86_400 },
    ];
    expect((await limiter.consume("s", windows)).allowed).toBe(true);
    expect((await limiter.consume("s", windows)).allowed).toBe(true);
    expect(await limiter.consume("s", windows)).toMatchObject({ allowed: false, remaining: 0, retryAfter: 60 });
    advance(60_000);
    expect(await limiter.consume("s", windows)).toMatchObject({ allowed: true, remaining: 0, limit: 3 });
    // The day is spent: the next minute window does not help...
    advance(30_000);
    expect((await limiter.consume("s", windows)).allowed).toBe(false);
    // ...but the next UTC day does.
    advance(60_000);
    expect((await limiter.consume("s", windows)).allowed).toBe(true);
  });

  it("keeps subjects apart", async () => {
    const limiter = createLocalLimiter(fakeClock("2025-03-01T00:00:00Z").clock);
    const one = [{ limit: 1, seconds: 60 }];
    expect((await limiter.consume("a", one)).allowed).toBe(true);
    expect((await limiter.consume("b", one)).allowed).toBe(true);
    expect((await limiter.consume("a", one)).allowed).toBe(false);
  });

  it("plans follow the spec; unknown plans get free limits; enterprise has no daily cap", () => {
    expect(planWindows("free")).toEqual([
      { limit: 60, seconds: 60 },
      { limit: 1000, seconds: 86_400 },
    ]);
    expect(planWindows("pro")).toEqual([
      { limit: 1000, seconds: 60 },
      { limit: 100_000, seconds: 86_400 },
    ]);
    expect(planWindows("enterprise")).toEqual([{ limit: 10_000, seconds: 60 }]);
    expect(planWindows("mystery")).toEqual(planWindows("free"));
  });
});

describe("over HTTP", () => {
  let stubs: Stubs;
  let gw: TestGateway;
  const time = fakeClock("2025-03-01T12:00:10Z");

  beforeAll(async () => {
    stubs = await startStubs();
    stubs.state.tokens.set("tok-free", principal({ org: "org-free", permissions: ALL_PERMISSIONS, plan: "free" }));
    stubs.state.tokens.set("tok-free-2", principal({ org: "org-free", permissions: ALL_PERMISSIONS, plan: "free" }));
    stubs.state.tokens.set("tok-pro", principal({ org: "org-pro", permissions: ALL_PERMISSIONS, plan: "pro" }));
    gw = await startGateway(stubs, { IP_RATE_LIMIT_PER_MINUTE: "3", IP_RATE_LIMIT_PER_DAY: "100" }, time.clock);
  });

  afterAll(async () => {
    await gw?.close();
    await stubs?.close();
  });

  it("a free organization gets 60 a minute, shared by all its credentials, then 429", async () => {
    const reset = String(Date.parse("2025-03-01T12:01:00Z") / 1000);
    for (let i = 0; i < 60; i++) {
      const res = await api(gw.url, "/v1/regions", { token: i % 2 ? "tok-free" : "tok-free-2" });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("60");
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(59 - i));
      expect(res.headers.get("x-ratelimit-reset")).toBe(reset);
    }
    const res = await api(gw.url, "/v1/regions", { token: "tok-free" });
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe("rate_limit_exceeded");
    expect(res.headers.get("retry-after")).toBe("50");
    expect(res.headers.get("x-ratelimit-remaining")).toBe("0");
    // Another organization is unaffected.
    expect((await api(gw.url, "/v1/regions", { token: "tok-pro" })).headers.get("x-ratelimit-limit")).toBe("1000");
  });

  it("the next minute window lets the organization in again", async () => {
    time.advance(60_000);
    const res = await api(gw.url, "/v1/regions", { token: "tok-free" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-remaining")).toBe("59");
  });

  it("unauthenticated requests are limited per client IP", async () => {
    time.advance(60_000);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await api(gw.url, "/v1/nowhere")).status);
    expect(statuses).toEqual([404, 404, 404, 429]);
    // Bad credentials count against the IP too: guessing tokens is not free.
    const res = await api(gw.url, "/v1/databases", { token: "guess" });
    expect(res.status).toBe(429);
    expect(res.headers.get("x-ratelimit-limit")).toBe("3");
    const signup = await api(gw.url, "/v1/auth/token", { method: "POST", body: { email: "a@b.c", password: "x" } });
    expect(signup.status).toBe(429);
    // An authenticated organization is not held back by its IP.
    expect((await api(gw.url, "/v1/regions", { token: "tok-pro" })).status).toBe(200);
  });
});
