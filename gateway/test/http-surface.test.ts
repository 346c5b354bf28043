import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTES } from "../src/routes/table.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-surface";

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-s", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  gw = await startGateway(stubs, {
    CORS_ORIGINS: "https://console.example.com, https://admin.example.com",
    PUBLIC_BASE_URL: "https://api.example.com",
  });
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("security headers", () => {
  it.each([
    ["a success", "/v1/regions", TOKEN],
    ["an error", "/v1/nope", undefined],
    ["health", "/healthz", undefined],
  ])("are on %s", async (_what, path, token) => {
    const res = await api(gw.url, path, { token });
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("strict-transport-security")).toMatch(/^max-age=\d+/);
    expect(res.headers.get("x-powered-by")).toBeNull();
  });

  it("are on every kind of answer, with the request id and the rate-limit headers", async () => {
    const created = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "headers", region: "fsn1", tier: "micro" },
    });
    const id = created.body.data.id as string;
    const answers = {
      created,
      file: await api(gw.url, `/v1/databases/${id}/ca-certificate`, { token: TOKEN }),
      noContent: await api(gw.url, `/v1/databases/${id}`, { method: "DELETE", token: TOKEN }),
      methodNotAllowed: await api(gw.url, "/v1/regions", { method: "DELETE", token: TOKEN }),
      head: await api(gw.url, "/v1/regions", { method: "HEAD", token: TOKEN }),
      preflight: await api(gw.url, "/v1/regions", {
        method: "OPTIONS",
        headers: { origin: "https://console.example.com", "access-control-request-method": "GET" },
      }),
    };
    expect(Object.fromEntries(Object.entries(answers).map(([k, r]) => [k, r.status]))).toEqual({
      created: 201,
      file: 200,
      noContent: 204,
      methodNotAllowed: 405,
      head: 200,
      preflight: 204,
    });
    for (const [what, res] of Object.entries(answers)) {
      expect(res.headers.get("x-content-type-options"), what).toBe("nosniff");
      expect(res.headers.get("cache-control"), what).toBe("no-store");
      expect(res.headers.get("strict-transport-security"), what).toMatch(/^max-age=\d+/);
      expect(res.headers.get("x-request-id"), what).toMatch(/^req_[a-z0-9]{24}$/);
      // A preflight is the browser's, not the client's: it is not counted. An unmatched
      // request is counted against the client IP, the others against the organization.
      if (what !== "preflight") {
        expect(res.headers.get("x-ratelimit-limit"), what).toBe(what === "methodNotAllowed" ? "60" : "10000");
      }
    }
    // Exactly one of each, even where Express or the error path set headers of their own.
    expect(answers.methodNotAllowed.headers.get("allow")).toBe("GET, HEAD");
    expect(answers.file.headers.get("content-disposition")).toMatch(/^attachment;/);
    expect(answers.preflight.headers.get("access-control-allow-origin")).toBe("https://console.example.com");
  });

  it("no HSTS when the public URL is plain http", async () => {
    const plain = await startGateway(stubs);
    try {
      expect((await api(plain.url, "/healthz")).headers.get("strict-transport-security")).toBeNull();
    } finally {
      await plain.close();
    }
  });
});

describe("CORS", () => {
  const origin = "https://console.example.com";

  it("answers a preflight from an allowed origin with the path's methods", async () => {
    const res = await api(gw.url, "/v1/databases/db-1", {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "PATCH", "access-control-request-headers": "authorization" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    expect(res.headers.get("access-control-allow-methods")).toBe("GET, PATCH, DELETE");
    expect(res.headers.get("access-control-allow-headers")).toContain("Idempotency-Key");
    expect(res.headers.get("vary")).toContain("Origin");
  });

  it("lets a browser read an allowed origin's responses and their headers", async () => {
    const res = await api(gw.url, "/v1/regions", { token: TOKEN, headers: { origin } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    expect(res.headers.get("access-control-expose-headers")).toContain("X-RateLimit-Remaining");
  });

  it("gives another origin nothing", async () => {
    const res = await api(gw.url, "/v1/regions", { token: TOKEN, headers: { origin: "https://evil.example" } });
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const preflight = await api(gw.url, "/v1/regions", {
      method: "OPTIONS",
      headers: { origin: "https://evil.example", "access-control-request-method": "GET" },
    });
    expect(preflight.status).toBe(405);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("a preflight for an unknown path is a 404", async () => {
    const res = await api(gw.url, "/v1/nothing-here", {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "GET" },
    });
    expect(res.status).toBe(404);
  });
});

describe("GET /v1/openapi.json", () => {
  let doc: any;

  beforeAll(async () => {
    const res = await api(gw.url, "/v1/openapi.json");
    expect(res.status).toBe(200);
    doc = res.body;
  });

  it("is OpenAPI 3.1 for the public base URL, served without credentials", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.servers).toEqual([{ url: "https://api.example.com" }]);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("documents every route of the table, with its permission", () => {
    for (const route of ROUTES) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, "{$1}")]?.[route.method.toLowerCase()];
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      expect(op.operationId).toMatch(/^\w+$/);
      if ("permission" in route) {
        expect(op["x-permission"]).toBe(route.permission);
        expect(op.security).toEqual([{ bearer: [] }]);
      } else {
        expect(op.security).toEqual([]);
      }
      expect(op.responses[String(route.response.status)]).toBeDefined();
    }
    const operations = Object.values(doc.paths).flatMap((p: any) => Object.keys(p));
    expect(operations).toHaveLength(ROUTES.length);
    const ids = Object.values(doc.paths).flatMap((p: any) => Object.values(p).map((op: any) => op.operationId));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("request bodies come from the validation schemas", () => {
    const create = doc.paths["/v1/databases"].post;
    expect(create.requestBody.content["application/json"].schema).toMatchObject({
      type: "object",
      required: ["name", "region", "tier"],
      properties: { name: { type: "string" }, version: { type: "string" } },
    });
    const key = doc.paths["/v1/organization/api-keys"].post.requestBody.content["application/json"].schema;
    expect(key.properties.scopes).toMatchObject({ type: "array", items: { type: "string" } });
    expect(key.properties.expires_at).toMatchObject({ type: "string", format: "date-time" });
  });

  it("documents path and query parameters, and the PEM response", () => {
    const list = doc.paths["/v1/databases"].get;
    const params = list.parameters.filter((p: any) => !p.$ref);
    expect(params.map((p: any) => `${p.in}:${p.name}:${p.schema.type}`)).toEqual([
      "query:page:integer",
      "query:per_page:integer",
      "query:status:string",
      "query:region:string",
    ]);
    expect(params[1].schema).toMatchObject({ minimum: 1, maximum: 100, default: 20 });
    expect(params[3].schema.enum).toEqual(["fsn1", "nbg1", "hel1"]);
    expect(doc.paths["/v1/databases/{id}"].get.parameters).toEqual([
      {
        name: "id",
        in: "path",
        required: true,
        description: "The database's id (`db-…`).",
        schema: { type: "string", pattern: "^db-[a-z0-9]+$", maxLength: 128 },
      },
      { $ref: "#/components/parameters/RequestId" },
    ]);
    expect(doc.paths["/v1/databases/{id}/start"].post.parameters).toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
    expect(doc.paths["/v1/databases/{id}/ca-certificate"].get.responses["200"].content).toHaveProperty("application/x-pem-file");
    expect(doc.paths["/v1/databases/{id}"].delete.responses["204"].content).toBeUndefined();
  });
});
