import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ApiKeySchema, Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set("tok-admin", principal({ org: "org-ib", permissions: ALL_PERMISSIONS, plan: "pro" }));
  stubs.state.tokens.set(
    "tok-narrow-key",
    principal({ org: "org-ib", permissions: ["databases:read", "members:read"], plan: "pro", kind: "api_key" }),
  );
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("auth routes (public)", () => {
  it("signup → 201 user, organization and token", async () => {
    const res = await api(gw.url, "/v1/auth/signup", {
      method: "POST",
      body: { email: "ada@example.com", password: "correct horse", name: "Ada", organization_name: "Analytical" },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      user: { id: "user-new", email: "ada@example.com", name: "Ada" },
      organization: { id: "org-new", name: "Analytical", plan: "free", created_at: "2025-03-01T10:00:00.000Z" },
      access_token: "tok-new",
      token_type: "Bearer",
      expires_at: "2025-03-01T10:00:00.000Z",
    });
    expect(res.headers.get("x-ratelimit-limit")).toBe("60");
    expect(stubs.state.seen.get("signup")!.at(-1)).toMatchObject({ organizationName: "Analytical" });
  });

  it("signup with missing and mistyped fields is 422 per field", async () => {
    const res = await api(gw.url, "/v1/auth/signup", { method: "POST", body: { email: 7, name: "Ada" } });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([
      { field: "email", message: "must be a string" },
      { field: "password", message: "is required" },
      { field: "organization_name", message: "is required" },
    ]);
  });

  it("signup with a taken e-mail is 409", async () => {
    const res = await api(gw.url, "/v1/auth/signup", {
      method: "POST",
      body: { email: "taken@example.com", password: "pw-pw-pw-pw", name: "T", organization_name: "T" },
    });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("resource_conflict");
  });

  it("token → 200 {access_token, token_type, expires_at}", async () => {
    const res = await api(gw.url, "/v1/auth/token", {
      method: "POST",
      body: { email: "ada@example.com", password: "correct horse", organization_id: "org-new" },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ access_token: "tok-login", token_type: "Bearer", expires_at: "2025-03-01T10:00:00.000Z" });
    expect(stubs.state.seen.get("createToken")!.at(-1)).toMatchObject({ organizationId: "org-new" });
  });

  it("token with a wrong password is 401", async () => {
    const res = await api(gw.url, "/v1/auth/token", { method: "POST", body: { email: "ada@example.com", password: "nope" } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("invalid_token");
    expect(res.headers.get("www-authenticate")).toBeTruthy();
  });

  it("public routes ignore an Authorization header", async () => {
    const res = await api(gw.url, "/v1/auth/token", {
      method: "POST",
      token: "garbage",
      body: { email: "ada@example.com", password: "correct horse" },
    });
    expect(res.status).toBe(200);
  });
});

describe("GET /v1/billing/usage", () => {
  it("maps the usage report to docs/product.md, Billing", async () => {
    const res = await api(gw.url, "/v1/billing/usage", { token: "tok-admin" });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      period: { start: "2025-03-01T00:00:00.000Z", end: "2025-04-01T00:00:00.000Z" },
      usage: {
        compute: { hours: 10.5, amount: 0.21 },
        storage: { gb: 2, amount: 0.25 },
        data_transfer: { gb: 120, amount: 1 },
        replicas: { hours: 0, amount: 0 },
      },
      total: 1.46,
      currency: "USD",
    });
    expect(stubs.state.seen.get("getUsage")!.at(-1)).toMatchObject({ organizationId: "org-ib" });
  });
});

describe("API keys", () => {
  it("creates a key, showing the secret once", async () => {
    const res = await api(gw.url, "/v1/organization/api-keys", {
      method: "POST",
      token: "tok-admin",
      body: { name: "ci", scopes: ["databases:read"], expires_at: "2026-01-01T00:00:00Z" },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: "key-1",
      name: "ci",
      scopes: ["databases:read"],
      prefix: "dbk_abcd",
      role: "admin",
      created_by: "user-org-ib",
      created_at: "2025-03-01T10:00:00.000Z",
      expires_at: "2026-01-01T00:00:00.000Z",
      secret: "dbk_abcd_secret",
    });
  });

  it("lists keys without secrets", async () => {
    const res = await api(gw.url, "/v1/organization/api-keys", { token: "tok-admin" });
    expect(res.status).toBe(200);
    expect(res.body.data.api_keys).toHaveLength(1);
    expect(res.body.data.api_keys[0].secret).toBeUndefined();
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 1, total_pages: 1 });
  });

  it("passes identity the actor (user, role, effective permissions) on every key call", async () => {
    await api(gw.url, "/v1/organization/api-keys", { token: "tok-narrow-key" });
    const actor = { userId: "user-org-ib", role: Role.OWNER, permissions: ["databases:read", "members:read"] };
    expect(stubs.state.seen.get("listApiKeys")!.at(-1)).toMatchObject({ organizationId: "org-ib", actor });
    await api(gw.url, "/v1/organization/api-keys/key-404", { method: "DELETE", token: "tok-narrow-key" });
    expect(stubs.state.seen.get("revokeApiKey")!.at(-1)).toMatchObject({ organizationId: "org-ib", id: "key-404", actor });
  });

  it("a key without scopes gets the caller's effective permissions (identity decides; the gateway sends none)", async () => {
    const res = await api(gw.url, "/v1/organization/api-keys", { method: "POST", token: "tok-narrow-key", body: { name: "narrow" } });
    expect(res.status).toBe(201);
    expect(res.body.data.scopes).toEqual(["databases:read", "members:read"]);
    expect(stubs.state.seen.get("createApiKey")!.at(-1)).toMatchObject({
      scopes: [],
      actor: { userId: "user-org-ib", permissions: ["databases:read", "members:read"] },
    });
  });

  it("a credential cannot mint a key with scopes it lacks: identity's refusal is 403", async () => {
    const res = await api(gw.url, "/v1/organization/api-keys", {
      method: "POST",
      token: "tok-narrow-key",
      body: { name: "escalate", scopes: ["databases:read", "billing:write"] },
    });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("insufficient_permissions");
    expect(res.body.error.message).toContain("billing:write");
  });

  it("wrong types are 422", async () => {
    const res = await api(gw.url, "/v1/organization/api-keys", {
      method: "POST",
      token: "tok-admin",
      body: { name: "x", scopes: "databases:read", expires_at: "tomorrow" },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([
      { field: "scopes", message: "must be an array of strings" },
      { field: "expires_at", message: "must be an ISO 8601 timestamp" },
    ]);
  });

  it("a narrow key sees and revokes only its creator's keys; identity's refusal is 403", async () => {
    stubs.state.apiKeys.push(
      create(ApiKeySchema, {
        id: "key-someone",
        name: "theirs",
        prefix: "dbk_efgh",
        createdBy: "user-someone-else",
        role: Role.DEVELOPER,
        createdAt: timestampFromDate(new Date("2025-03-01T10:00:00Z")),
      }),
    );
    const listed = await api(gw.url, "/v1/organization/api-keys", { token: "tok-narrow-key" });
    expect(listed.body.data.api_keys.map((k: { id: string }) => k.id)).not.toContain("key-someone");
    const res = await api(gw.url, "/v1/organization/api-keys/key-someone", { method: "DELETE", token: "tok-narrow-key" });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("insufficient_permissions");
    expect(
      (await api(gw.url, "/v1/organization/api-keys", { token: "tok-admin" })).body.data.api_keys.map((k: { id: string }) => k.id),
    ).toContain("key-someone");
  });

  it("revokes a key: 204, then 404", async () => {
    expect((await api(gw.url, "/v1/organization/api-keys/key-1", { method: "DELETE", token: "tok-admin" })).status).toBe(204);
    expect((await api(gw.url, "/v1/organization/api-keys/key-1", { method: "DELETE", token: "tok-admin" })).status).toBe(404);
  });
});
