/**
 * Issue 10, "never a 500 on bad input", gateway side: request schemas are
 * strict (unknown fields, enums from the shared catalogue, length caps, no
 * control characters or unpaired surrogates), an id that cannot exist is a
 * 404 before any service is asked, and the OpenAPI document publishes the
 * same rules. Every upstream call the gateway makes is recorded, so "never
 * reaching a service" is observed, not assumed.
 */
import { ALERT_CHANNELS, GRANTABLE_ROLES, PAYMENT_METHOD_TYPES, PLANS, POSTGRES_VERSIONS, REGIONS, SCOPES, TIERS } from "@dbaas/catalogue";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openApiDocument } from "../src/routes/openapi.ts";
import { protectedRoute, json, type Route } from "../src/routes/route.ts";
import { ROUTES } from "../src/routes/table.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-schemas";
/** Upstream calls other than authentication and the revocation feed, as `service.method`. */
let calls: string[] = [];
const QUIET = new Set(["authenticate", "watchRevocations", "ackRevocation"]);

/** Wraps the gateway's upstream clients so every call is recorded before it goes out. */
function recordUpstreamCalls(gateway: TestGateway): void {
  for (const service of ["identity", "databases", "billing"] as const) {
    const client = gateway.ctx[service] as object;
    gateway.ctx[service] = new Proxy(client, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (!QUIET.has(String(prop))) calls.push(`${service}.${String(prop)}`);
          return value.apply(target, args);
        };
      },
    }) as never;
  }
}

beforeAll(async () => {
  stubs = await startStubs();
  // Hundreds of requests: a plan and an IP allowance no test reaches.
  stubs.state.tokens.set(TOKEN, principal({ org: "org-schemas", permissions: ALL_PERMISSIONS, plan: "internal" }));
  gw = await startGateway(stubs, { IP_RATE_LIMIT_PER_MINUTE: "100000", IP_RATE_LIMIT_PER_DAY: "1000000" });
  recordUpstreamCalls(gw);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

beforeEach(() => {
  calls = [];
});

const send = (method: string, path: string, body?: unknown) =>
  api(gw.url, path, { method, token: TOKEN, body: body ?? (method === "POST" || method === "PATCH" ? {} : undefined) });

const CREATE = { name: "orders", region: "fsn1", tier: "micro" };
const postDatabase = (body: unknown) => send("POST", "/v1/databases", body);

const idRoutes = ROUTES.filter((r) => r.path.includes("/:id"));
/** A well-formed id of the kind the route's `:id` takes. */
const wellFormedId = (route: Route) => `${/^\^([a-z]+)-/.exec(route.params?.id?.schema.pattern ?? "^x-")![1]}-abc123`;
const withId = (route: Route, id: string) => route.path.replace(":id", id);
const label = (r: Route) => `${r.method} ${r.path}`;

describe("path ids that cannot exist", () => {
  it("every {id} route of the table declares its id kind", () => {
    expect(idRoutes.length).toBeGreaterThanOrEqual(16);
    expect(idRoutes.filter((r) => !r.params?.id).map(label)).toEqual([]);
  });

  const impossible = [
    ["NUL", "%00"],
    ["NUL after a good id", "ID%00"],
    ["a line feed", "ID%0A"],
    ["another resource's prefix", "zz-abc123"],
    ["upper case", "ID-ABC"],
    ["an absurd length", `ID${"a".repeat(300)}`],
  ];
  it.each(impossible)("%s in the id is 404 on every {id} route, without a service being asked", async (_what, template) => {
    for (const route of idRoutes) {
      const id = template.replace("ID", wellFormedId(route));
      const res = await send(route.method, withId(route, id));
      expect(res.status, `${label(route)} with ${id}`).toBe(404);
      expect(res.body.error.code).toBe("resource_not_found");
      expect(res.body.error.message).toMatch(/ not found$/);
    }
    expect(calls).toEqual([]);
  });

  it("a well-formed id does reach the service (the check above can tell the difference)", async () => {
    const res = await send("GET", "/v1/databases/db-doesnotexist");
    expect(res.status).toBe(404);
    expect(calls).toEqual(["databases.getDatabase"]);
  });

  it("a route whose path parameter has no declared id does not load", () => {
    const declare = () =>
      protectedRoute({
        method: "DELETE",
        path: "/v1/things/:id",
        summary: "x",
        permission: "databases:write",
        response: json(200, "Database"),
        handler: async () => ({ status: 204 }) as never,
      });
    expect(declare).toThrow(/params must declare exactly the path's parameters \(id\)/);
  });
});

describe("request bodies", () => {
  it('{"size":"big"} on create is 422 naming size, and nothing is created', async () => {
    const res = await postDatabase({ ...CREATE, size: "big" });
    expect(res.status).toBe(422);
    expect(res.body.error).toEqual({
      code: "validation_error",
      message: "request failed validation",
      details: [
        { field: "size", message: "is not a field of this request (it takes: name, region, tier, version, standbys, synchronous)" },
      ],
    });
    expect(calls).toEqual([]);
  });

  it("a number past its field's maximum is 422 naming the field, before any service is asked (was a 500: 1e+21 into an int32)", async () => {
    const res = await send("PATCH", "/v1/databases/db-abc/pooler", { pool_size: 1e21 });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(["pool_size"]);
    expect(calls).toEqual([]);
  });

  it("a POST that takes no body refuses fields too, and takes {} or nothing", async () => {
    const res = await send("POST", "/v1/databases/db-abc/start", { force: true });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "force", message: "is not a field of this request (it takes none)" }]);
    expect(calls).toEqual([]);
    expect((await send("POST", "/v1/databases/db-abc/start", {})).status).toBe(404);
    expect((await api(gw.url, "/v1/databases/db-abc/start", { method: "POST", token: TOKEN })).status).toBe(404);
    expect(calls).toEqual(["databases.startDatabase", "databases.startDatabase"]);
  });

  it("names every unknown field (up to 20, then a count), escaping what cannot be echoed", async () => {
    const res = await postDatabase({ ...CREATE, colour: "blue", "\u0000x": 1 });
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(["colour", "\\u0000x"]);
    const many = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`extra_${i}`, i]));
    const crowd = await postDatabase({ ...CREATE, ...many });
    expect(crowd.body.error.details).toHaveLength(21);
    expect(crowd.body.error.details[20]).toEqual({ field: "body", message: "has 5 more unknown fields" });
  });

  /** Every string field of a route's body (items of string arrays included) holding NUL, the rest well-typed. */
  const nulBody = (route: Route) =>
    Object.fromEntries(
      Object.entries(route.body!.properties as Record<string, any>).map(([name, s]) => [
        name,
        s.type === "string" ? "a\u0000b" : s.type === "array" ? ["a\u0000b"] : s.type === "boolean" ? true : 1,
      ]),
    );

  const stringsOf = (route: Route) =>
    Object.entries(route.body!.properties as Record<string, any>).filter(([, s]) => s.type === "string" || s.type === "array");

  it("NUL in any string of any body is 422 naming the field, before any service is asked", async () => {
    const routes = ROUTES.filter((r) => r.body && stringsOf(r).length > 0);
    expect(routes.length).toBeGreaterThanOrEqual(12);
    for (const route of routes) {
      const path = route.params ? withId(route, wellFormedId(route)) : route.path;
      const res = await send(route.method, path, nulBody(route));
      expect(res.status, label(route)).toBe(422);
      const strings = stringsOf(route);
      expect(
        res.body.error.details.map((d: { field: string }) => d.field),
        label(route),
      ).toEqual(strings.map(([n]) => n));
    }
    expect(calls).toEqual([]);
  });

  it("the issue's own cases: NUL in new_owner_id and in a log-in e-mail", async () => {
    const transfer = await send("POST", "/v1/organization/transfer", { new_owner_id: "\u0000", password: "correct horse" });
    expect(transfer.status).toBe(422);
    expect(transfer.body.error.details).toEqual([{ field: "new_owner_id", message: "must be an id of the form user-…" }]);
    const login = await api(gw.url, "/v1/auth/token", { method: "POST", body: { email: "a\u0000b", password: "correct horse" } });
    expect(login.status).toBe(422);
    expect(login.body.error.details).toEqual([{ field: "email", message: "must not contain control characters or unpaired surrogates" }]);
  });

  it("a 250 KB e-mail is 422 at 254 characters", async () => {
    const res = await api(gw.url, "/v1/auth/token", {
      method: "POST",
      body: { email: `${"a".repeat(250_000)}@example.com`, password: "x" },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "email", message: "must be at most 254 characters" }]);
    expect(calls).toEqual([]);
  });

  it("an unpaired surrogate is 422", async () => {
    const res = await send("POST", "/v1/databases", '{"name":"ab\\ud800cd","region":"fsn1","tier":"micro"}');
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "name", message: "must be valid Unicode (no unpaired surrogates)" }]);
    const key = await send("POST", "/v1/billing/payment-methods", '{"type":"card","token":"tok_\\udc00"}');
    expect(key.body.error.details).toEqual([{ field: "token", message: "must be valid Unicode (no unpaired surrogates)" }]);
  });

  it("names refuse control and format characters; lengths count after trimming", async () => {
    for (const name of ["evil\u202Eexe", "zero\u200Bwidth", "two\nlines"]) {
      const res = await postDatabase({ ...CREATE, name });
      expect(res.body.error.details, JSON.stringify(name)).toEqual([
        { field: "name", message: "must not contain control or format characters (line breaks, bidi overrides, zero-width characters)" },
      ]);
    }
    expect((await postDatabase({ ...CREATE, name: "  ab  " })).body.error.details).toEqual([
      { field: "name", message: "must be at least 3 characters" },
    ]);
    expect((await postDatabase({ ...CREATE, name: "x".repeat(64) })).body.error.details).toEqual([
      { field: "name", message: "must be at most 63 characters" },
    ]);
    const padded = await postDatabase({ ...CREATE, name: `  ${"p".repeat(63)}  ` });
    expect(padded.status).toBe(201);
    expect(padded.body.data.name).toBe("p".repeat(63));
  });

  it.each([
    ["/v1/databases", { ...CREATE, tier: "huge" }, "tier", `must be one of: ${TIERS.map((t) => t.name).join(", ")}`],
    ["/v1/databases", { ...CREATE, region: "mars1" }, "region", `must be one of: ${REGIONS.map((r) => r.code).join(", ")}`],
    ["/v1/databases", { ...CREATE, version: "15" }, "version", `must be one of: ${POSTGRES_VERSIONS.join(", ")}`],
    ["/v1/databases/db-abc/resize", { tier: "Micro" }, "tier", `must be one of: ${TIERS.map((t) => t.name).join(", ")}`],
    ["/v1/billing/payment-methods", { type: "paypal", token: "tok_visa" }, "type", `must be one of: ${PAYMENT_METHOD_TYPES.join(", ")}`],
    [
      "/v1/billing/alerts",
      { threshold: 5, currency: "USD", channels: ["sms"] },
      "channels",
      `must each be one of: ${ALERT_CHANNELS.join(", ")}`,
    ],
    ["/v1/organization/api-keys", { name: "k", scopes: ["root"] }, "scopes", `must each be one of: ${SCOPES.join(", ")}`],
    ["/v1/organization/members", { email: "a@example.com", role: "boss" }, "role", `must be one of: ${GRANTABLE_ROLES.join(", ")}`],
  ])("POST %s with a wrong %s… is 422 listing the allowed values", async (path, body, field, message) => {
    const res = await send("POST", path, body);
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field, message: expect.stringContaining(message) }]);
    expect(calls).toEqual([]);
  });

  it("PATCH /v1/organization with an unknown plan is 422 listing the plans", async () => {
    const res = await send("PATCH", "/v1/organization", { plan: "internal" });
    expect(res.body.error.details).toEqual([{ field: "plan", message: `must be one of: ${PLANS.join(", ")}` }]);
  });

  it("arrays have a maximum number of items", async () => {
    const res = await send("POST", "/v1/organization/api-keys", { name: "k", scopes: [...SCOPES, "databases:read"] });
    expect(res.body.error.details).toEqual([{ field: "scopes", message: `must have at most ${SCOPES.length} items` }]);
  });
});

describe("backups and restore (docs/product.md, Backups and point-in-time restore)", () => {
  const restore = (body: unknown) => send("POST", "/v1/databases/db-abc/restore", body);

  it.each<[string, unknown, unknown]>([
    ["no name", {}, [{ field: "name", message: "is required" }]],
    [
      "an unknown field",
      { name: "copy", target_time: "2025-03-01T10:00:00Z" },
      [{ field: "target_time", message: "is not a field of this request (it takes: name, restore_time, tier, region)" }],
    ],
    [
      "a tier not in the catalogue",
      { name: "copy", tier: "huge" },
      [{ field: "tier", message: expect.stringMatching(/^must be one of: /) }],
    ],
    [
      "a region not in the catalogue",
      { name: "copy", region: "mars1" },
      [{ field: "region", message: "must be one of: fsn1, nbg1, hel1" }],
    ],
    ...[
      "yesterday",
      "2025-03-01",
      "2025-03-01 10:00:00Z",
      "2025-03-01T10:00:00",
      "2025-02-30T10:00:00Z",
      "2025-02-29T10:00:00Z",
      "2025-13-01T10:00:00Z",
      "2025-03-01T24:00:00Z",
      "2025-03-01T10:60:00Z",
      "2025-03-01T10:00:00+24:00",
      1740823200,
    ].map((t): [string, unknown, unknown] => [
      `restore_time ${JSON.stringify(t)}`,
      { name: "copy", restore_time: t },
      [{ field: "restore_time", message: expect.stringMatching(/^must be an ISO 8601 timestamp$/) }],
    ]),
  ])("%s is 422, before any service is asked", async (_what, body, details) => {
    const res = await restore(body);
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual(details);
    expect(calls).toEqual([]);
  });

  it("a date-time that names a real instant reaches the service (a leap day, an offset, nanoseconds)", async () => {
    for (const t of ["2024-02-29T23:59:59Z", "2025-03-01T10:00:00.123456789+05:30", "2025-03-01t10:00:00z"]) {
      expect((await restore({ name: "copy", restore_time: t })).status, t).toBe(404);
    }
    expect(calls).toEqual(["databases.restoreToTime", "databases.restoreToTime", "databases.restoreToTime"]);
  });

  it("taking a backup takes no body", async () => {
    const res = await send("POST", "/v1/databases/db-abc/backups", { type: "manual" });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "type", message: "is not a field of this request (it takes none)" }]);
    expect(calls).toEqual([]);
  });
});

describe("query parameters", () => {
  it("NUL or an unknown value in a filter is 422 listing the values; NUL where a number goes is 400", async () => {
    const status = await send("GET", "/v1/databases?status=%00");
    expect(status.status).toBe(422);
    expect(status.body.error.details[0]).toMatchObject({
      field: "status",
      message: expect.stringMatching(/^must be one of: provisioning, running/),
    });
    const region = await send("GET", "/v1/databases?region=mars1");
    expect(region.body.error.details).toEqual([{ field: "region", message: "must be one of: fsn1, nbg1, hel1" }]);
    expect((await send("GET", "/v1/databases?page=%00")).status).toBe(400);
    expect(calls).toEqual([]);
  });
});

describe("the OpenAPI document publishes the same rules", () => {
  const doc = openApiDocument(ROUTES, "https://api.example.net") as Record<string, any>;
  const bodyOf = (method: string, path: string) => doc.paths[path][method].requestBody.content["application/json"].schema;

  /** Every schema below `s` that describes a string, an array or an integer, with where it is. */
  function leaves(s: any, at: string): Array<[string, any]> {
    if (s.type === "object") {
      // A map's values (a configuration's parameters) are leaves too.
      const values = typeof s.additionalProperties === "object" ? leaves(s.additionalProperties, `${at}.*`) : [];
      return [...Object.entries(s.properties ?? {}).flatMap(([k, v]) => leaves(v, `${at}.${k}`)), ...values];
    }
    // A value of several types: each of its strings and arrays is bounded too.
    if (Array.isArray(s.anyOf)) return s.anyOf.flatMap((branch: any) => leaves(branch, at));
    if (s.type === "array") return [[at, s], ...leaves(s.items, `${at}[]`)];
    return ["string", "integer"].includes(s.type) ? [[at, s]] : [];
  }

  // An integer without a maximum reached a service's int32 field as 1e+21 and failed its encoding: a 500 (fuzz seed
  // 1349623624). Numbers (doubles: an alert's threshold, a configuration value) are bounded by their service.
  it("every request body is closed, every string has maxLength, every array maxItems, every integer a maximum", () => {
    const bodies = Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
      Object.entries(item)
        .filter(([, op]: [string, any]) => op.requestBody)
        .map(([m, op]: [string, any]) => [`${m} ${path}`, op.requestBody.content["application/json"].schema]),
    );
    expect(bodies.length).toBe(ROUTES.filter((r) => r.body).length);
    for (const [where, schema] of bodies) {
      expect(schema.additionalProperties, where).toBe(false);
      for (const [at, s] of leaves(schema, where)) {
        if (s.type === "string") expect(s.maxLength, at).toEqual(expect.any(Number));
        else if (s.type === "array") expect(s.maxItems, at).toEqual(expect.any(Number));
        else expect(s.maximum, at).toEqual(expect.any(Number));
      }
    }
  });

  it("enums for tier, region, version, role, plan, channel, payment-method type and scopes, from the catalogue", () => {
    const create = bodyOf("post", "/v1/databases").properties;
    expect(create.tier.enum).toEqual(TIERS.map((t) => t.name));
    expect(create.region.enum).toEqual(REGIONS.map((r) => r.code));
    expect(create.version.enum).toEqual([...POSTGRES_VERSIONS]);
    expect(bodyOf("post", "/v1/databases/{id}/resize").properties.tier.enum).toEqual(TIERS.map((t) => t.name));
    const restore = bodyOf("post", "/v1/databases/{id}/restore");
    expect(restore.properties.tier.enum).toEqual(TIERS.map((t) => t.name));
    expect(restore.properties.region.enum).toEqual(REGIONS.map((r) => r.code));
    expect(restore.properties.restore_time).toMatchObject({ type: "string", format: "date-time" });
    expect(restore.required).toEqual(["name"]);
    expect(bodyOf("post", "/v1/organization/members").properties.role.enum).toEqual([...GRANTABLE_ROLES]);
    expect(bodyOf("patch", "/v1/organization/members/{id}").properties.role.enum).toEqual([...GRANTABLE_ROLES]);
    expect(bodyOf("patch", "/v1/organization").properties.plan.enum).toEqual([...PLANS]);
    expect(bodyOf("post", "/v1/billing/alerts").properties.channels.items.enum).toEqual([...ALERT_CHANNELS]);
    expect(bodyOf("post", "/v1/billing/payment-methods").properties.type.enum).toEqual([...PAYMENT_METHOD_TYPES]);
    expect(bodyOf("post", "/v1/organization/api-keys").properties.scopes.items.enum).toEqual([...SCOPES]);
  });

  it("the shared length limits: e-mail 254, passwords 256, database names 3–63, other names 1–100", () => {
    const signup = bodyOf("post", "/v1/auth/signup").properties;
    expect(signup.email).toMatchObject({ maxLength: 254 });
    expect(signup.password).toMatchObject({ minLength: 8, maxLength: 256 });
    expect(signup.name).toMatchObject({ minLength: 1, maxLength: 100 });
    expect(signup.organization_name).toMatchObject({ minLength: 1, maxLength: 100 });
    expect(bodyOf("post", "/v1/auth/token").properties.email).toMatchObject({ maxLength: 254 });
    expect(bodyOf("post", "/v1/databases").properties.name).toMatchObject({ minLength: 3, maxLength: 63 });
    expect(bodyOf("post", "/v1/organization/api-keys").properties.name).toMatchObject({ maxLength: 100 });
    expect(bodyOf("post", "/v1/organization/transfer").properties.new_owner_id).toMatchObject({ pattern: "^user-[a-z0-9]+$" });
  });

  it("every {id} path parameter carries the pattern the gateway checks", () => {
    for (const route of idRoutes) {
      const path = route.path.replace(/:([A-Za-z_]+)/g, "{$1}");
      const params = doc.paths[path][route.method.toLowerCase()].parameters.filter((p: any) => p.in === "path");
      expect(
        params.map((p: any) => p.name),
        label(route),
      ).toEqual(Object.keys(route.params!));
      for (const param of params) {
        // Ids are at most 128 characters; names of things inside a database (roles, logical databases) at most 63.
        const { pattern, maxLength } = route.params![param.name]!.schema;
        const want = { type: "string", pattern, maxLength };
        expect(param.schema, `${label(route)} ${param.name}`).toEqual(want);
      }
    }
  });
});
