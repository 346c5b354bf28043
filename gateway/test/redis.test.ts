import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { Clock } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { captureLog } from "@dbaas/test/support/log";
import { createLocalLimiter, planWindows } from "../src/rate-limit/limiter.ts";
import { createRedisLimiter } from "../src/rate-limit/redis-limiter.ts";
import { COMMAND_TIMEOUT_MS, connectRedis, type RedisLink } from "../src/redis.ts";
import { inspector, REDIS_URL, startRelay, uniquePrefix } from "./support/redis.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let redis: Awaited<ReturnType<typeof inspector>>;
const prefixes: string[] = [];
const gateways: TestGateway[] = [];

/**
 * Windows are keyed by the gateway's clock; freezing it at the start of the
 * next minute keeps a test inside one window however slowly it runs, while the
 * counters' expiry (which Redis measures in real time) stays in the future.
 */
const frozen: Clock = (() => {
  const t = new Date((Math.floor(Date.now() / 60_000) + 1) * 60_000 + 1_000);
  return { now: () => t };
})();

async function gateway(env: Record<string, string>, clock?: Clock, log = captureLog()) {
  const gw = await startGateway(stubs, env, clock, log);
  gateways.push(gw);
  // Until its first connection is up a gateway counts locally; tests of shared state start after that.
  if (env.REDIS_URL === REDIS_URL) await until("redis ok", async () => gw.ctx.redisHealth() === "ok");
  return { ...gw, log };
}

function withRedis(prefix = uniquePrefix()) {
  prefixes.push(prefix);
  return { REDIS_URL, REDIS_KEY_PREFIX: prefix };
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

beforeAll(async () => {
  stubs = await startStubs();
  redis = await inspector();
  for (const [token, org, plan] of [
    ["tok-r1", "org-r1", "free"],
    ["tok-r2", "org-r2", "free"],
    ["tok-r3", "org-r3", "free"],
    ["tok-i1", "org-i1", "enterprise"],
    ["tok-i2", "org-i2", "enterprise"],
  ] as const) {
    stubs.state.tokens.set(token, principal({ org, permissions: ALL_PERMISSIONS, plan }));
  }
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  for (const p of prefixes) await redis?.drop(p);
  redis?.close();
  await stubs?.close();
});

describe("rate limits in Redis", () => {
  it("two gateway processes share one organization's budget", async () => {
    const env = withRedis();
    const a = await gateway(env, frozen);
    const b = await gateway(env, frozen);
    for (let i = 0; i < 60; i++) {
      const res = await api((i % 2 ? a : b).url, "/v1/regions", { token: "tok-r1" });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(59 - i));
    }
    for (const gw of [a, b]) {
      const res = await api(gw.url, "/v1/regions", { token: "tok-r1" });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    expect((await api(a.url, "/healthz")).body.redis).toBe("ok");
  });

  it("concurrent requests on two gateways never overshoot the limit", async () => {
    const env = withRedis();
    const a = await gateway(env, frozen);
    const b = await gateway(env, frozen);
    const results = await Promise.all(Array.from({ length: 90 }, (_, i) => api((i % 2 ? a : b).url, "/v1/regions", { token: "tok-r2" })));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30);
  });

  it("counts a burst of one organization in one script call, each request decided as if alone", async () => {
    const prefix = uniquePrefix();
    prefixes.push(prefix);
    const link = connectRedis(REDIS_URL, captureLog());
    try {
      await until("redis ok", async () => link.usable());
      let calls = 0;
      const counted: RedisLink = {
        ...link,
        run: (command) => {
          calls++;
          return link.run(command);
        },
      };
      const limiter = createRedisLimiter(counted, prefix, frozen, createLocalLimiter(frozen));
      const free = planWindows("free");
      const decisions = await Promise.all([
        ...Array.from({ length: 70 }, () => limiter.consume("org:burst", free)),
        ...Array.from({ length: 5 }, () => limiter.consume("org:other", free)),
      ]);
      expect(calls).toBe(2);
      const burst = decisions.slice(0, 70);
      // In arrival order: 60 allowed, counting down the minute window, then refused until it resets.
      expect(burst.slice(0, 60).map((d) => [d.allowed, d.remaining])).toEqual(Array.from({ length: 60 }, (_, i) => [true, 59 - i]));
      for (const refused of burst.slice(60)) {
        expect(refused).toMatchObject({ allowed: false, limit: 60, remaining: 0 });
        expect(refused.retryAfter).toBeGreaterThan(0);
      }
      expect(decisions.slice(70).map((d) => d.remaining)).toEqual([59, 58, 57, 56, 55]);
      // Refused requests were not counted, in either window.
      const keys = (await redis.keys(prefix)).filter((k) => k.includes("{org:burst}"));
      expect((await Promise.all(keys.map((k) => redis.client.get(k)))).sort()).toEqual(["60", "60"]);
      // The next request, alone, sees the same state a 71st sequential one would.
      expect(await limiter.consume("org:burst", free)).toMatchObject({ allowed: false, remaining: 0 });
    } finally {
      await link.close();
    }
  });

  it("a burst whose script call fails is decided by the local limiter, request by request", async () => {
    const failing: RedisLink = {
      client: undefined as never,
      run: async () => {
        throw new Error("connection reset");
      },
      usable: () => true,
      close: async () => {},
    };
    const limiter = createRedisLimiter(failing, uniquePrefix(), frozen, createLocalLimiter(frozen));
    const one = [{ limit: 3, seconds: 60 }];
    const decisions = await Promise.all(Array.from({ length: 5 }, () => limiter.consume("org:local", one)));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
  });

  it("keeps a counter per window, expiring with it", async () => {
    const env = withRedis();
    const gw = await gateway(env, frozen);
    await api(gw.url, "/v1/regions", { token: "tok-r3" });
    const keys = (await redis.keys(env.REDIS_KEY_PREFIX)).filter((k) => k.includes("rl:"));
    expect(keys).toHaveLength(2);
    for (const key of keys) {
      expect(await redis.client.get(key)).toBe("1");
      const ttl = await redis.client.ttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(key.includes(":86400:") ? 86_400 + 62 : 62 + 60);
    }
  });

  it("with Redis unreachable, keeps serving on local limits and says so once", async () => {
    const gw = await gateway({ REDIS_URL: "redis://127.0.0.1:1", REDIS_KEY_PREFIX: uniquePrefix() });
    await until("the first connection attempt to fail", async () => gw.log.lines.some((l) => l.level === "warn"));
    for (let i = 0; i < 5; i++) {
      const res = await api(gw.url, "/v1/regions", { token: "tok-i1" });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(9_999 - i));
    }
    expect((await api(gw.url, "/healthz")).body).toMatchObject({ status: "ok", redis: "degraded" });
    await new Promise((r) => setTimeout(r, 500)); // several reconnection attempts
    const warnings = gw.log.lines.filter((l) => l.level === "warn");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(/redis unavailable/);
  });

  it("a Redis that stops answering costs a request at most the command deadline, then the local limiter decides", async () => {
    const relay = await startRelay();
    const env = { REDIS_URL: relay.url, REDIS_KEY_PREFIX: uniquePrefix() };
    prefixes.push(env.REDIS_KEY_PREFIX);
    const gw = await gateway(env, frozen);
    await until("redis ok", async () => (await api(gw.url, "/healthz")).body.redis === "ok");
    relay.stall();
    const started = Date.now();
    const stalled = await api(gw.url, "/v1/regions", { token: "tok-i2" });
    const waited = Date.now() - started;
    expect(stalled.status).toBe(200);
    expect(stalled.headers.get("x-ratelimit-limit")).toBe("10000");
    expect(waited).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 50);
    expect(waited).toBeLessThan(COMMAND_TIMEOUT_MS + 1_500);
    expect((await api(gw.url, "/healthz")).body.redis).toBe("degraded");
    // Marked down: the next request does not wait for Redis at all.
    const next = Date.now();
    expect((await api(gw.url, "/v1/regions", { token: "tok-i2" })).status).toBe(200);
    expect(Date.now() - next).toBeLessThan(COMMAND_TIMEOUT_MS);
    relay.resume();
    await until("redis ok again", async () => (await api(gw.url, "/healthz")).body.redis === "ok");
    await relay.cut();
  });

  it("falls back while Redis is away and returns to it when it is back", async () => {
    const relay = await startRelay();
    const env = { REDIS_URL: relay.url, REDIS_KEY_PREFIX: uniquePrefix() };
    prefixes.push(env.REDIS_KEY_PREFIX);
    const gw = await gateway(env, frozen);
    await until("redis ok", async () => (await api(gw.url, "/healthz")).body.redis === "ok");
    expect((await api(gw.url, "/v1/regions", { token: "tok-i2" })).status).toBe(200);

    await relay.cut();
    await until("redis degraded", async () => (await api(gw.url, "/healthz")).body.redis === "degraded");
    const during = await api(gw.url, "/v1/regions", { token: "tok-i2" });
    expect(during.status).toBe(200);
    expect(during.headers.get("x-ratelimit-limit")).toBe("10000");

    await relay.restore();
    await until("redis ok again", async () => (await api(gw.url, "/healthz")).body.redis === "ok");
    const before = Number(await redis.client.get((await redis.keys(env.REDIS_KEY_PREFIX))[0]!));
    expect((await api(gw.url, "/v1/regions", { token: "tok-i2" })).status).toBe(200);
    const after = Number(await redis.client.get((await redis.keys(env.REDIS_KEY_PREFIX))[0]!));
    expect(after).toBe(before + 1);
    expect(gw.log.lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([expect.stringMatching(/redis unavailable/), "redis available again"]),
    );
    await relay.cut();
  });
});

describe("Idempotency-Key", () => {
  let a: TestGateway;
  let b: TestGateway;
  let prefix: string;
  const creates = () => stubs.state.seen.get("createDatabase")?.length ?? 0;
  const post = (gw: TestGateway, key: string, body: unknown, token = "tok-i1", path = "/v1/databases") =>
    api(gw.url, path, { method: "POST", token, body, headers: { "idempotency-key": key } });

  beforeAll(async () => {
    const env = withRedis();
    prefix = env.REDIS_KEY_PREFIX;
    a = await gateway(env);
    b = await gateway(env);
  });

  it("replays the first response to a retry, on any gateway", async () => {
    const before = creates();
    const first = await post(a, "key-replay", { name: "idem-one", region: "fsn1", tier: "micro" });
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    for (const gw of [a, b]) {
      const again = await post(gw, "key-replay", { name: "idem-one", region: "fsn1", tier: "micro" });
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body.data).toEqual(first.body.data);
      expect(again.body.meta.request_id).toBe(again.headers.get("x-request-id"));
      expect(again.body.meta.request_id).not.toBe(first.body.meta.request_id);
    }
    expect(creates()).toBe(before + 1);
  });

  it("never stores the response in the clear", async () => {
    const values = await Promise.all((await redis.keys(`${prefix}idem:`)).map((k) => redis.client.get(k)));
    expect(values.length).toBeGreaterThan(0);
    for (const v of values) {
      expect(v).not.toContain("s3cret");
      expect(v).not.toContain("key-replay");
    }
    for (const key of await redis.keys(`${prefix}idem:`)) {
      expect(await redis.client.pTTL(key)).toBeGreaterThan(23 * 3_600_000);
    }
  });

  it("the same key with a different body or endpoint is 422", async () => {
    await post(a, "key-mismatch", { name: "idem-two", region: "fsn1", tier: "micro" });
    const body = await post(b, "key-mismatch", { name: "idem-three", region: "fsn1", tier: "micro" });
    expect(body.status).toBe(422);
    expect(body.body.error.details).toEqual([{ field: "Idempotency-Key", message: expect.any(String) }]);
    const path = await post(a, "key-mismatch", {}, "tok-i1", `/v1/databases/db-0001/stop`);
    expect(path.status).toBe(422);
  });

  it("a retry while the first is still running is 409; only one runs", async () => {
    const before = creates();
    const body = { name: "slow-idem", region: "fsn1", tier: "micro" };
    const results = await Promise.all([post(a, "key-race", body), post(b, "key-race", body)]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(results.find((r) => r.status === 409)!.body.error.code).toBe("resource_conflict");
    expect(creates()).toBe(before + 1);
    expect((await post(a, "key-race", body)).status).toBe(201);
  });

  it("replays an error the service gave", async () => {
    const before = creates();
    // A name only the service refuses: the gateway's own 422s (a name too short) are not stored.
    const first = await post(a, "key-invalid", { name: "stub-refuses", region: "fsn1", tier: "micro" });
    expect(first.status).toBe(422);
    const again = await post(b, "key-invalid", { name: "stub-refuses", region: "fsn1", tier: "micro" });
    expect(again.status).toBe(422);
    expect(again.body.error).toEqual(first.body.error);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(creates()).toBe(before + 1);
  });

  it("does not keep an answer that means 'not carried out': the retry runs", async () => {
    stubs.state.flaky = true;
    const first = await post(a, "key-flaky", { name: "flaky", region: "fsn1", tier: "micro" });
    expect(first.status).toBe(503);
    stubs.state.flaky = false;
    const retry = await post(a, "key-flaky", { name: "flaky", region: "fsn1", tier: "micro" });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
  });

  it("keys belong to an organization", async () => {
    const mine = await post(a, "key-shared-name", { name: "idem-org", region: "fsn1", tier: "micro" });
    const theirs = await post(a, "key-shared-name", { name: "idem-org", region: "fsn1", tier: "micro" }, "tok-i2");
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get("idempotent-replayed")).toBeNull();
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
  });

  it("refuses a malformed key", async () => {
    const res = await post(a, "k".repeat(256), { name: "idem-long", region: "fsn1", tier: "micro" });
    expect(res.status).toBe(400);
    expect(res.body.error.details[0].field).toBe("Idempotency-Key");
  });

  it("works on public routes, scoped to the client", async () => {
    const before = stubs.state.seen.get("signup")?.length ?? 0;
    const body = { email: "idem@example.com", password: "pw-pw-pw-pw", name: "I", organization_name: "I" };
    const first = await api(a.url, "/v1/auth/signup", { method: "POST", body, headers: { "idempotency-key": "signup-1" } });
    const again = await api(b.url, "/v1/auth/signup", { method: "POST", body, headers: { "idempotency-key": "signup-1" } });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(stubs.state.seen.get("signup")!.length).toBe(before + 1);
  });

  it("without Redis, the same semantics hold within one process", async () => {
    const local = await gateway({});
    const before = creates();
    const body = { name: "idem-local", region: "fsn1", tier: "micro" };
    expect((await post(local, "key-local", body)).status).toBe(201);
    const again = await post(local, "key-local", body);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect((await post(local, "key-local", { ...body, name: "other" })).status).toBe(422);
    expect(creates()).toBe(before + 1);
  });
});

describe("maintenance mode", () => {
  const cli = fileURLToPath(new URL("../src/cli/maintenance.ts", import.meta.url));
  const run = (env: Record<string, string>, ...args: string[]) =>
    promisify(execFile)(process.execPath, ["--import", "tsx", cli, ...args], { env: { ...process.env, ...env } });

  it("the CLI switches every gateway to 503 with Retry-After, and back", async () => {
    const env = withRedis();
    const gw = await gateway(env);
    const other = await gateway(env);
    expect((await api(gw.url, "/v1/regions", { token: "tok-i1" })).status).toBe(200);

    const on = await run(env, "on", "--retry-after", "120");
    expect(on.stdout).toContain("maintenance mode is on");
    for (const g of [gw, other]) {
      await until("maintenance seen", async () => (await api(g.url, "/v1/regions", { token: "tok-i1" })).status === 503);
    }
    for (const [path, opts] of [
      ["/v1/regions", { token: "tok-i1" }],
      ["/v1/auth/token", { method: "POST", body: { email: "a@b.c", password: "x" } }],
      ["/v1/no-such-route", {}],
    ] as const) {
      const res = await api(gw.url, path, opts);
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("maintenance_mode");
      expect(res.headers.get("retry-after")).toBe("120");
      expect(res.headers.get("x-ratelimit-limit")).toMatch(/^\d+$/);
    }
    expect((await api(gw.url, "/healthz")).body).toMatchObject({ status: "ok", maintenance: true });

    expect((await run(env, "status")).stdout).toContain("on (Retry-After: 120 s)");
    expect((await run(env, "off")).stdout).toContain("maintenance mode is off");
    await until("maintenance lifted", async () => (await api(gw.url, "/v1/regions", { token: "tok-i1" })).status === 200);
  });

  it("the CLI refuses bad usage", async () => {
    await expect(run(withRedis(), "sideways")).rejects.toMatchObject({ stderr: expect.stringContaining("usage:") });
    await expect(run(withRedis(), "on", "--retry-after", "soon")).rejects.toMatchObject({
      stderr: expect.stringContaining("--retry-after"),
    });
  });
});
