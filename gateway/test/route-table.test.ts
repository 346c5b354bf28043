import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRouteTable, MalformedParamError } from "../src/routes/match.ts";
import { ROUTES } from "../src/routes/table.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

describe("route table", () => {
  const table = createRouteTable([
    { method: "GET", path: "/v1/things", value: "list" },
    { method: "POST", path: "/v1/things", value: "create" },
    { method: "GET", path: "/v1/things/:id", value: "get" },
    { method: "DELETE", path: "/v1/things/:id", value: "delete" },
    { method: "POST", path: "/v1/things/:id/start", value: "start" },
    { method: "GET", path: "/v1/things/special", value: "special" },
    { method: "GET", path: "/v1/things/:id/parts/:part", value: "part" },
  ]);

  it("matches literal paths and parameters, literal segments first", () => {
    expect(table.match("GET", "/v1/things")).toEqual({ kind: "found", value: "list", params: {} });
    expect(table.match("POST", "/v1/things")).toEqual({ kind: "found", value: "create", params: {} });
    expect(table.match("GET", "/v1/things/t-1")).toEqual({ kind: "found", value: "get", params: { id: "t-1" } });
    expect(table.match("GET", "/v1/things/special")).toEqual({ kind: "found", value: "special", params: {} });
    // "special" is also a valid :id where the literal has no such continuation.
    expect(table.match("POST", "/v1/things/special/start")).toEqual({ kind: "found", value: "start", params: { id: "special" } });
    expect(table.match("GET", "/v1/things/a/parts/b")).toEqual({ kind: "found", value: "part", params: { id: "a", part: "b" } });
  });

  it("takes one trailing slash, as Express does without strict routing", () => {
    expect(table.match("GET", "/v1/things/")).toMatchObject({ kind: "found", value: "list" });
    expect(table.match("GET", "/v1/things/t-1/")).toMatchObject({ kind: "found", params: { id: "t-1" } });
    expect(table.match("GET", "/v1/things//")).toEqual({ kind: "none" });
  });

  it("is case-sensitive and needs every segment non-empty", () => {
    expect(table.match("GET", "/V1/things")).toEqual({ kind: "none" });
    expect(table.match("GET", "/v1//things")).toEqual({ kind: "none" });
    expect(table.match("POST", "/v1/things//start")).toEqual({ kind: "none" });
    expect(table.match("GET", "/")).toEqual({ kind: "none" });
    expect(table.match("GET", "")).toEqual({ kind: "none" });
    expect(table.match("GET", "/v1/things/a/b")).toEqual({ kind: "none" });
  });

  it("serves HEAD with GET and lists the methods of a known path otherwise", () => {
    expect(table.match("HEAD", "/v1/things/t-1")).toMatchObject({ kind: "found", value: "get" });
    expect(table.match("PATCH", "/v1/things/t-1")).toEqual({ kind: "method", allow: ["GET", "DELETE", "HEAD"] });
    expect(table.match("GET", "/v1/things/t-1/start")).toEqual({ kind: "method", allow: ["POST"] });
    expect(table.methodsOf("/v1/things/t-1")).toEqual(["GET", "DELETE"]);
    expect(table.methodsOf("/v1/nothing")).toEqual([]);
  });

  it("percent-decodes parameters and refuses malformed encodings", () => {
    expect(table.match("GET", "/v1/things/a%20b")).toMatchObject({ params: { id: "a b" } });
    expect(table.match("GET", "/v1/things/a%2Fb")).toMatchObject({ params: { id: "a/b" } });
    expect(() => table.match("GET", "/v1/things/%E0%A4%A")).toThrow(MalformedParamError);
  });

  it("refuses a table that declares a route twice or names one parameter two ways", () => {
    expect(() =>
      createRouteTable([
        { method: "GET", path: "/a/:id", value: 1 },
        { method: "GET", path: "/a/:id/", value: 2 },
      ]),
    ).not.toThrow();
    expect(() =>
      createRouteTable([
        { method: "GET", path: "/a/:id", value: 1 },
        { method: "GET", path: "/a/:id", value: 2 },
      ]),
    ).toThrow(/declared twice/);
    expect(() =>
      createRouteTable([
        { method: "GET", path: "/a/:id", value: 1 },
        { method: "POST", path: "/a/:name", value: 2 },
      ]),
    ).toThrow(/clashes/);
  });

  it("builds from the gateway's own routes", () => {
    const gatewayTable = createRouteTable(ROUTES.map((r) => ({ method: r.method, path: r.path, value: r })));
    for (const route of ROUTES) {
      const concrete = route.path.replace(/:(\w+)/g, "x-$1");
      const match = gatewayTable.match(route.method, concrete);
      expect(match.kind === "found" && match.value).toBe(route);
    }
  });
});

describe("routing through the gateway", () => {
  let stubs: Stubs;
  let gw: TestGateway;
  const TOKEN = "tok-routing";

  beforeAll(async () => {
    stubs = await startStubs();
    stubs.state.tokens.set(TOKEN, principal({ org: "org-r", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
    gw = await startGateway(stubs);
  });

  afterAll(async () => {
    await gw?.close();
    await stubs?.close();
  });

  it("hands the decoded id to the upstream, with or without a trailing slash", async () => {
    const created = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "routed", region: "fsn1", tier: "micro" },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const encoded = id.replace("-", "%2D");
    for (const path of [`/v1/databases/${id}`, `/v1/databases/${id}/`, `/v1/databases/${encoded}`]) {
      const res = await api(gw.url, path, { token: TOKEN });
      expect(res.status, path).toBe(200);
      expect(res.body.data.id).toBe(id);
    }
  });

  it("answers concurrent reads of different databases each with its own", async () => {
    const ids: string[] = [];
    for (const name of ["first", "second"]) {
      const res = await api(gw.url, "/v1/databases", { method: "POST", token: TOKEN, body: { name, region: "fsn1", tier: "micro" } });
      ids.push(res.body.data.id as string);
    }
    const paths = [...ids, "db-missing"].map((id) => `/v1/databases/${id}`);
    const answers = await Promise.all(paths.map((path) => api(gw.url, path, { token: TOKEN })));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 404]);
    expect(answers.slice(0, 2).map((a) => a.body.data.id)).toEqual(ids);
    expect(answers[2]!.body.error.code).toBe("resource_not_found");
  });

  it("answers a malformed percent-encoding with 400 in the envelope, before authenticating", async () => {
    const res = await api(gw.url, "/v1/databases/%E0%A4%A", { token: "not-a-token" });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("validation_error");
    expect(res.headers.get("x-ratelimit-limit")).not.toBeNull();
  });

  it("serves HEAD on GET routes without a body, and 404 for paths in another case", async () => {
    const head = await api(gw.url, "/v1/regions", { method: "HEAD", token: TOKEN });
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    const upper = await api(gw.url, "/V1/regions", { token: TOKEN });
    expect(upper.status).toBe(404);
    expect(upper.body.error.code).toBe("resource_not_found");
  });

  it("answers health on /healthz only for GET and HEAD", async () => {
    expect((await api(gw.url, "/healthz")).status).toBe(200);
    expect((await api(gw.url, "/healthz/")).status).toBe(200);
    expect((await api(gw.url, "/healthz", { method: "HEAD" })).status).toBe(200);
    const post = await api(gw.url, "/healthz", { method: "POST" });
    expect(post.status).toBe(404);
  });
});
