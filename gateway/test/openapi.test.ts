/**
 * The OpenAPI document as a document: valid OpenAPI 3.1 (Redocly's structural
 * validation and recommended rules), every schema valid JSON Schema 2020-12,
 * and exactly the route table in it. That responses match it is checked by
 * the end-to-end tests, whose client validates everything it receives.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { createConformanceChecker } from "@dbaas/test/support/api";
import { lintOpenApi } from "../scripts/lint-openapi.ts";
import { errorStatuses, openApiDocument } from "../src/routes/openapi.ts";
import { ROUTES } from "../src/routes/table.ts";

const doc = openApiDocument(ROUTES, "https://api.example.net") as Record<string, any>;
const pathOf = (expressPath: string) => expressPath.replace(/:(\w+)/g, "{$1}");

const escapePointer = (key: string) => key.replace(/~/g, "~0").replace(/\//g, "~1");

/** JSON pointers to every place below `node` that holds a JSON Schema. */
function schemasIn(node: unknown, at: string): string[] {
  if (typeof node !== "object" || node === null) return [];
  return Object.entries(node).flatMap(([key, value]) =>
    key === "schema" && typeof value === "object" ? [`${at}/${key}`] : schemasIn(value, `${at}/${escapePointer(key)}`),
  );
}

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1 without a single lint problem", () => {
    expect(doc.openapi).toBe("3.1.0");
    const { ok, output } = lintOpenApi(doc);
    expect(ok, output).toBe(true);
  }, 30_000);

  it("holds only valid JSON Schema 2020-12, in ajv's strict mode", () => {
    const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, validateFormats: false });
    ajv.addVocabulary(["openapi", "info", "servers", "paths", "components", "security", "tags"]);
    ajv.addSchema(doc, "openapi.json");
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() => ajv.compile({ $ref: `openapi.json#/components/schemas/${name}` }), name).not.toThrow();
    }
    const places = schemasIn(doc.paths, "/paths").concat(schemasIn(doc.components, "/components"));
    expect(places.length).toBeGreaterThan(ROUTES.length);
    for (const at of places) expect(() => ajv.compile({ $ref: `openapi.json#${at}` }), at).not.toThrow();
  });

  it("has every route of the table, and nothing else", () => {
    for (const route of ROUTES) {
      const op = doc.paths[pathOf(route.path)]?.[route.method.toLowerCase()];
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      const documented = Object.keys(op.responses).map(Number);
      expect(documented, `${route.method} ${route.path}`).toEqual([route.response.status, ...errorStatuses(route)]);
    }
    const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item as object).map((m) => `${m} ${path}`));
    expect(operations.sort()).toEqual(ROUTES.map((r) => `${r.method.toLowerCase()} ${pathOf(r.path)}`).sort());
  });

  it("documents 401 on public routes that check a password, and never 401/403 on the others", () => {
    const responses = (method: string, path: string) => Object.keys(doc.paths[path][method].responses);
    expect(responses("post", "/v1/auth/token")).toContain("401");
    expect(responses("post", "/v1/invitations/accept")).toContain("401");
    expect(responses("post", "/v1/auth/signup")).not.toContain("401");
    expect(responses("get", "/v1/openapi.json")).not.toContain("403");
  });

  it("catches an undocumented field, a missing one, a wrong status and a missing header", () => {
    const check = createConformanceChecker(doc);
    const headers = new Headers({
      "content-type": "application/json; charset=utf-8",
      "x-request-id": "req_1",
      "x-ratelimit-limit": "60",
      "x-ratelimit-remaining": "59",
      "x-ratelimit-reset": "1767225600",
    });
    const item = {
      id: "db-1",
      name: "orders",
      region: "fsn1",
      tier: "micro",
      version: "17",
      status: "running",
      created_at: "2026-01-01T00:00:00.000Z",
    };
    const body = { data: { databases: [item] }, meta: { request_id: "req_1", page: 1, per_page: 20, total: 1, total_pages: 1 } };
    const res = (status: number, b: unknown, h = headers) => ({
      method: "GET",
      path: "/v1/databases?page=1",
      status,
      headers: h,
      body: b,
      text: JSON.stringify(b),
    });
    expect(() => check.check(res(200, body))).not.toThrow();
    const extra = { ...body, data: { databases: [{ ...item, password: "leaked" }] } };
    expect(() => check.check(res(200, extra))).toThrow(/GET \/v1\/databases → 200: body does not match.*additional/s);
    const { tier: _tier, ...missing } = item;
    expect(() => check.check(res(200, { ...body, data: { databases: [missing] } }))).toThrow(/missingProperty.*tier/);
    expect(() => check.check(res(418, body))).toThrow(/status not documented/);
    const noLimit = new Headers(headers);
    noLimit.delete("x-ratelimit-remaining");
    expect(() => check.check(res(200, body, noLimit))).toThrow(/required header x-ratelimit-remaining missing/);
    const error = { error: { code: "resource_not_found", message: "no such endpoint", details: [] }, meta: { request_id: "req_1" } };
    expect(() => check.check({ ...res(404, error), path: "/v1/nothing" })).not.toThrow();
    expect(() => check.check({ ...res(200, body), path: "/v1/nothing" })).toThrow(/not in the document/);
  });
});
