import { create } from "@bufbuild/protobuf";
import type { Clock } from "@dbaas/kit";
import { RevocationSchema } from "@dbaas/proto/identity";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ROUTES } from "../src/routes/table.ts";
import { api, startGateway, waitForRevocationFeed, type TestGateway } from "./support/gateway.ts";
import { captureLog } from "@dbaas/test/support/log";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
let now = Date.parse("2025-03-01T12:00:00Z");
const clock: Clock = { now: () => new Date(now) };

beforeAll(async () => {
  stubs = await startStubs();
  const far = new Date(now + 86_400_000);
  stubs.state.tokens.set("tok-owner", principal({ org: "org-a", permissions: ALL_PERMISSIONS, expiresAt: far }));
  stubs.state.tokens.set(
    "tok-viewer",
    principal({ org: "org-a", permissions: ["databases:read", "metrics:read", "members:read"], expiresAt: far }),
  );
  // Its own organization on the enterprise plan: it requests every protected route once, more than the free plan's
  // minute allows under this file's frozen clock, and a 429 would hide the 403 under test.
  stubs.state.tokens.set("tok-nothing", principal({ org: "org-nothing", permissions: [], expiresAt: far, plan: "enterprise" }));
  gw = await startGateway(stubs, {}, clock);
  await waitForRevocationFeed(gw);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

beforeEach(() => {
  stubs.state.authenticateCalls = 0;
});

describe("401 invalid_token", () => {
  it("no Authorization header", async () => {
    const res = await api(gw.url, "/v1/databases");
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("invalid_token");
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="api"');
    expect(res.headers.get("x-ratelimit-limit")).toBe("60");
    expect(stubs.state.authenticateCalls).toBe(0);
  });

  it.each([["Basic dXNlcjpwYXNz"], ["Bearer"], ["Bearer two words"], ["Bearer tok<>"], ["tok-owner"]])(
    "malformed header %j",
    async (header) => {
      const res = await fetch(`${gw.url}/v1/databases`, { headers: { authorization: header } });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="api", error="invalid_token"');
      expect(((await res.json()) as any).error.code).toBe("invalid_token");
      expect(stubs.state.authenticateCalls).toBe(0);
    },
  );

  it("a token identity does not know", async () => {
    const res = await api(gw.url, "/v1/databases", { token: "tok-unknown" });
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ code: "invalid_token", message: "token is invalid or expired" });
    expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
  });

  it("the bearer scheme is case-insensitive", async () => {
    const res = await fetch(`${gw.url}/v1/regions`, { headers: { authorization: "bearer tok-owner" } });
    expect(res.status).toBe(200);
  });
});

describe("403 insufficient_permissions", () => {
  it("a viewer may read", async () => {
    const res = await api(gw.url, "/v1/databases", { token: "tok-viewer" });
    expect(res.status).toBe(200);
  });

  it.each([
    ["POST", "/v1/databases", "databases:write"],
    ["DELETE", "/v1/databases/db-1", "databases:write"],
    ["POST", "/v1/databases/db-1/stop", "databases:write"],
    ["POST", "/v1/databases/db-1/reset-password", "databases:write"],
    ["GET", "/v1/billing/usage", "billing:read"],
    // API keys are for every member (issue 10); removing an alert still needs billing:write.
    ["DELETE", "/v1/billing/alerts/alr-1", "billing:write"],
  ])("a viewer may not %s %s", async (method, path, permission) => {
    const res = await api(gw.url, path, { method, token: "tok-viewer", body: method === "GET" ? undefined : {} });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("insufficient_permissions");
    expect(res.body.error.message).toContain(permission);
  });

  it("permission is checked before the body is looked at", async () => {
    const res = await api(gw.url, "/v1/databases", { method: "POST", token: "tok-viewer", body: "{not json" });
    expect(res.status).toBe(403);
  });

  it("every protected route refuses a principal without permissions", async () => {
    for (const route of ROUTES) {
      if (!("permission" in route)) continue;
      const path = route.path.replace(":id", "db-1");
      const body = route.method === "GET" ? undefined : {};
      const res = await api(gw.url, path, { method: route.method, token: "tok-nothing", body });
      expect(res.status, `${route.method} ${route.path}`).toBe(403);
    }
  });

  it("only signup, token, accepting an invitation and the OpenAPI document are public", () => {
    const open = ROUTES.filter((r) => !("permission" in r)).map((r) => `${r.method} ${r.path}`);
    expect(open.sort()).toEqual(["GET /v1/openapi.json", "POST /v1/auth/signup", "POST /v1/auth/token", "POST /v1/invitations/accept"]);
  });
});

describe("principal cache", () => {
  it("resolves a token once within 30 s", async () => {
    stubs.state.tokens.set("tok-cache", principal({ org: "org-c", permissions: ALL_PERMISSIONS, expiresAt: new Date(now + 3_600_000) }));
    for (let i = 0; i < 3; i++) expect((await api(gw.url, "/v1/regions", { token: "tok-cache" })).status).toBe(200);
    expect(stubs.state.authenticateCalls).toBe(1);
    now += 31_000;
    expect((await api(gw.url, "/v1/regions", { token: "tok-cache" })).status).toBe(200);
    expect(stubs.state.authenticateCalls).toBe(2);
  });

  it("never keeps a principal past its credential's expiry", async () => {
    stubs.state.tokens.set("tok-short", principal({ org: "org-c", permissions: ALL_PERMISSIONS, expiresAt: new Date(now + 5_000) }));
    expect((await api(gw.url, "/v1/regions", { token: "tok-short" })).status).toBe(200);
    stubs.state.tokens.delete("tok-short"); // identity now says: expired
    now += 6_000;
    expect((await api(gw.url, "/v1/regions", { token: "tok-short" })).status).toBe(401);
    expect(stubs.state.authenticateCalls).toBe(2);
  });

  it("does not cache refusals", async () => {
    await api(gw.url, "/v1/regions", { token: "tok-later" });
    stubs.state.tokens.set("tok-later", principal({ org: "org-c", permissions: ALL_PERMISSIONS, expiresAt: new Date(now + 3_600_000) }));
    expect((await api(gw.url, "/v1/regions", { token: "tok-later" })).status).toBe(200);
  });

  it("concurrent requests with one token share one identity call", async () => {
    stubs.state.tokens.set("tok-burst", principal({ org: "org-c", permissions: ALL_PERMISSIONS, expiresAt: new Date(now + 3_600_000) }));
    const results = await Promise.all(Array.from({ length: 5 }, () => api(gw.url, "/v1/regions", { token: "tok-burst" })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(stubs.state.authenticateCalls).toBe(1);
  });
});

describe("principal cache and identity's revocation feed", () => {
  const revoke = (r: { organizationId?: string; userId?: string; credentialId?: string }) => {
    for (const push of stubs.state.watchers) push(create(RevocationSchema, r));
  };
  const until = async (what: string, ok: () => boolean) => {
    const deadline = Date.now() + 5_000;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const known = (token: string) =>
    stubs.state.tokens.set(token, principal({ org: "org-f", permissions: ALL_PERMISSIONS, expiresAt: new Date(now + 3_600_000) }));

  it("drops exactly the principals a revocation names, at once", async () => {
    known("tok-f1");
    stubs.state.tokens.set("tok-g1", principal({ org: "org-g", permissions: ALL_PERMISSIONS, expiresAt: new Date(now + 3_600_000) }));
    await api(gw.url, "/v1/regions", { token: "tok-f1" });
    await api(gw.url, "/v1/regions", { token: "tok-g1" });
    expect(stubs.state.authenticateCalls).toBe(2);
    const size = gw.ctx.authCache.size;

    // user-org-f is the stub principal's user; the credential of another organization is untouched.
    revoke({ organizationId: "org-f", userId: "user-org-f" });
    await until("the revocation to arrive", () => gw.ctx.authCache.size === size - 1);
    stubs.state.tokens.delete("tok-f1");
    expect((await api(gw.url, "/v1/regions", { token: "tok-f1" })).status).toBe(401);
    expect((await api(gw.url, "/v1/regions", { token: "tok-g1" })).status).toBe(200);
    expect(stubs.state.authenticateCalls).toBe(3);

    revoke({ credentialId: "cred-org-g" });
    await until("the key revocation to arrive", () => gw.ctx.authCache.size === size - 2);
    expect((await api(gw.url, "/v1/regions", { token: "tok-g1" })).status).toBe(200);
    expect(stubs.state.authenticateCalls).toBe(4);
  });

  it("acknowledges each revocation, numbered as identity sent it, after applying it", async () => {
    known("tok-f3");
    await api(gw.url, "/v1/regions", { token: "tok-f3" });
    const size = gw.ctx.authCache.size;
    stubs.state.acks.length = 0;
    stubs.state.cacheSizeAtAck = () => gw.ctx.authCache.size;
    try {
      revoke({ organizationId: "org-f", userId: "user-org-f" });
      revoke({ credentialId: "cred-nobody" });
      await until("two acknowledgements", () => stubs.state.acks.length === 2);
      const subscription = stubs.state.acks[0]!.subscriptionId;
      expect(subscription).toMatch(/^sub-\d+$/);
      expect(stubs.state.acks.map((a) => [a.subscriptionId, a.seq])).toEqual([
        [subscription, stubs.state.acks[0]!.seq],
        [subscription, stubs.state.acks[0]!.seq + 1],
      ]);
      // The principal was gone from the cache before identity heard that it was.
      expect(stubs.state.acks[0]!.cacheSize).toBe(size - 1);
    } finally {
      delete stubs.state.cacheSizeAtAck;
    }
  });

  it("authenticates every request while the feed is down, and caches again once it is back", async () => {
    known("tok-f2");
    await api(gw.url, "/v1/regions", { token: "tok-f2" });
    stubs.state.feedDown = true;
    for (const push of stubs.state.watchers) push("break");
    await until("the feed to drop", () => !gw.ctx.authCache.live);
    expect(gw.ctx.authCache.size).toBe(0);
    const before = stubs.state.authenticateCalls;
    for (let i = 0; i < 3; i++) expect((await api(gw.url, "/v1/regions", { token: "tok-f2" })).status).toBe(200);
    expect(stubs.state.authenticateCalls).toBe(before + 3);

    stubs.state.feedDown = false;
    await waitForRevocationFeed(gw);
    for (let i = 0; i < 3; i++) await api(gw.url, "/v1/regions", { token: "tok-f2" });
    expect(stubs.state.authenticateCalls).toBe(before + 4);
  });

  it("does not keep a principal whose lookup overlapped a revocation", async () => {
    known("tok-f3");
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = gw.ctx.authCache.resolve("tok-f3", async () => {
      await gate;
      return stubs.state.tokens.get("tok-f3")!;
    });
    gw.ctx.authCache.revoke({ organizationId: "org-f", userId: "", credentialId: "" });
    release();
    await slow;
    const before = stubs.state.authenticateCalls;
    await api(gw.url, "/v1/regions", { token: "tok-f3" });
    expect(stubs.state.authenticateCalls).toBe(before + 1);
  });
});

describe("a revocation stream that goes silent", () => {
  it("is taken for dead: the cache is dropped until a new stream is subscribed", async () => {
    // The stub sends no heartbeats, so every stream falls silent.
    const silent = await startGateway(stubs, {}, clock, captureLog(), { silenceMs: 150, minBackoffMs: 1000 });
    try {
      await waitForRevocationFeed(silent);
      const deadline = Date.now() + 2_000;
      while (silent.ctx.authCache.live && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(silent.ctx.authCache.live).toBe(false);
      await waitForRevocationFeed(silent);
    } finally {
      await silent.close();
    }
  });
});
