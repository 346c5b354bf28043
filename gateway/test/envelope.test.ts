import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-envelope";

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-env", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

function expectRateLimitHeaders(headers: Headers) {
  for (const name of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]) {
    expect(headers.get(name), name).toMatch(/^\d+$/);
  }
}

function expectErrorEnvelope(body: any, code: string) {
  expect(body).toEqual({
    error: { code, message: expect.any(String), details: expect.any(Array) },
    meta: { request_id: expect.stringMatching(/^[A-Za-z0-9._-]+$/) },
  });
}

describe("success envelope", () => {
  it("wraps data with meta.request_id matching X-Request-Id", async () => {
    const res = await api(gw.url, "/v1/regions", { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      data: { regions: [{ code: "fsn1", name: "Falkenstein, DE" }] },
      meta: { request_id: res.headers.get("x-request-id") },
    });
    expect(res.body.meta.request_id).toMatch(/^req_[a-z0-9]{24}$/);
    expectRateLimitHeaders(res.headers);
  });

  it("204 has no body", async () => {
    const created = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "to-delete", region: "fsn1", tier: "micro" },
    });
    const res = await api(gw.url, `/v1/databases/${created.body.data.id}`, { method: "DELETE", token: TOKEN });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    expectRateLimitHeaders(res.headers);
  });
});

describe("request id", () => {
  it("echoes a sane client-supplied id", async () => {
    const res = await api(gw.url, "/v1/regions", { token: TOKEN, headers: { "x-request-id": "client.trace-42_A" } });
    expect(res.headers.get("x-request-id")).toBe("client.trace-42_A");
    expect(res.body.meta.request_id).toBe("client.trace-42_A");
  });

  it.each([["has spaces in it"], ["<script>"], ["x".repeat(129)]])("replaces an unsafe id %#", async (id) => {
    const res = await api(gw.url, "/v1/regions", { token: TOKEN, headers: { "x-request-id": id } });
    expect(res.headers.get("x-request-id")).toMatch(/^req_[a-z0-9]{24}$/);
  });

  it("is on error responses too", async () => {
    const res = await api(gw.url, "/v1/nope", { headers: { "x-request-id": "abc" } });
    expect(res.headers.get("x-request-id")).toBe("abc");
    expect(res.body.meta.request_id).toBe("abc");
  });
});

describe("unknown routes and methods", () => {
  it("unknown route is 404 resource_not_found with rate-limit headers", async () => {
    const res = await api(gw.url, "/v1/does-not-exist");
    expect(res.status).toBe(404);
    expectErrorEnvelope(res.body, "resource_not_found");
    expectRateLimitHeaders(res.headers);
  });

  it("a path outside /v1 is 404 too (one that is not a page or a console route)", async () => {
    const res = await api(gw.url, "/nothing-here");
    expect(res.status).toBe(404);
    expectErrorEnvelope(res.body, "resource_not_found");
  });

  it("paths are case-sensitive", async () => {
    const res = await api(gw.url, "/V1/regions", { token: TOKEN });
    expect(res.status).toBe(404);
  });

  it("wrong method on a known path is 405 with Allow", async () => {
    const res = await api(gw.url, "/v1/databases/db-1", { method: "PUT", token: TOKEN });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, PATCH, DELETE, HEAD");
    expectErrorEnvelope(res.body, "method_not_allowed");
    expectRateLimitHeaders(res.headers);
  });

  it("405 lists only what the path allows", async () => {
    const res = await api(gw.url, "/v1/databases/db-1/start", { token: TOKEN });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("a trailing slash matches like Express does", async () => {
    const res = await api(gw.url, "/v1/regions/", { token: TOKEN });
    expect(res.status).toBe(200);
  });
});

describe("request bodies", () => {
  it("malformed JSON is 400 validation_error", async () => {
    const res = await api(gw.url, "/v1/databases", { method: "POST", token: TOKEN, body: '{"name": "x",' });
    expect(res.status).toBe(400);
    expectErrorEnvelope(res.body, "validation_error");
    expect(res.body.error.message).toMatch(/JSON/);
    expectRateLimitHeaders(res.headers);
  });

  // Issue 10: well-formed JSON that is not an object fails validation (422), as an array always did.
  it.each(['"just a string"', "null", "42", "[1,2]"])("the well-formed JSON %s is not an object: 422", async (body) => {
    const res = await api(gw.url, "/v1/databases", { method: "POST", token: TOKEN, body });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "body", message: "must be a JSON object" }]);
  });

  it("a non-JSON content type is 400 validation_error", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: "name=x&region=fsn1",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.status).toBe(400);
    expectErrorEnvelope(res.body, "validation_error");
    expect(res.body.error.message).toMatch(/Content-Type/);
  });

  it("application/json with a charset parameter is accepted", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "charset-db", region: "fsn1", tier: "micro" },
      headers: { "content-type": "application/json; charset=utf-8" },
    });
    expect(res.status).toBe(201);
  });

  it("an unsupported charset is 400 in the envelope, not Express's page", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: '{"name":"x"}',
      headers: { "content-type": "application/json; charset=koi8-r" },
    });
    expect(res.status).toBe(400);
    expectErrorEnvelope(res.body, "validation_error");
  });

  it("an undecodable path parameter is 400 in the envelope", async () => {
    const res = await api(gw.url, "/v1/databases/%E0%A4%A", { token: TOKEN });
    expect(res.status).toBe(400);
    expectErrorEnvelope(res.body, "validation_error");
    expectRateLimitHeaders(res.headers);
  });

  it("a body over 1 MB is 413 in the envelope", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "x".repeat(1_100_000), region: "fsn1", tier: "micro" },
    });
    expect(res.status).toBe(413);
    expectErrorEnvelope(res.body, "payload_too_large");
    expectRateLimitHeaders(res.headers);
  });

  it("a body of just under 1 MB is parsed", async () => {
    // Whitespace, since every field now has a maximum length and unknown fields are refused.
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: `{"name": "ok-name", "region": "fsn1", "tier": "micro"}${" ".repeat(1_000_000)}`,
    });
    expect(res.status).toBe(201);
  });

  it("no body at all yields one 422 detail per required field", async () => {
    const res = await api(gw.url, "/v1/databases", { method: "POST", token: TOKEN });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([
      { field: "name", message: "is required" },
      { field: "region", message: "is required" },
      { field: "tier", message: "is required" },
    ]);
  });

  it("wrong types give one 422 detail per field, unknown fields named (issue 10)", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: 42, region: ["fsn1"], tier: "micro", version: 17, colour: "blue" },
    });
    expect(res.status).toBe(422);
    expectErrorEnvelope(res.body, "validation_error");
    expect(res.body.error.details).toEqual([
      { field: "name", message: "must be a string" },
      { field: "region", message: "must be a string" },
      { field: "version", message: "must be a string" },
      { field: "colour", message: "is not a field of this request (it takes: name, region, tier, version, standbys, synchronous)" },
    ]);
    expect(stubs.state.seen.get("createDatabase")?.some((r: any) => r.name === 42)).toBeFalsy();
  });
});

describe("health", () => {
  it("GET /healthz reports ok and the Redis state", async () => {
    const res = await api(gw.url, "/healthz");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ok", redis: "disabled", maintenance: false });
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });
});
