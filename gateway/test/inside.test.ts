/**
 * Inside a database through the gateway (docs/product.md, Inside the database): how InsideService maps onto
 * the public JSON and which refusals become which statuses — 201/200/204 on success; 422 naming the field for
 * a name that is not a plain identifier (the gateway's schema, or the service's rule); 404 for a name in a path
 * that cannot be one, an unknown one, and another organization's database; 409 for a database that is not
 * running, a taken name, dbadmin and defaultdb; 403 without the permission. Every response is checked against
 * the OpenAPI document by `api()`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-inside";
const OTHER = "tok-inside-other-org";
const READER = "tok-inside-read-only";
let db: string;

const post = (path: string, body?: unknown, token = TOKEN) => api(gw.url, path, { method: "POST", token, body: body ?? {} });
const get = (path: string, token = TOKEN) => api(gw.url, path, { token });
const del = (path: string, token = TOKEN) => api(gw.url, path, { method: "DELETE", token });
const seen = (rpc: string) => stubs.state.seen.get(rpc) ?? [];

async function newDatabase(name: string, status = "running"): Promise<string> {
  const res = await post("/v1/databases", { name, region: "fsn1", tier: "micro" });
  expect(res.status).toBe(201);
  stubs.state.databases.get(res.body.data.id)!.db.status = status;
  return res.body.data.id;
}

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-inside", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-inside-else", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stubs.state.tokens.set(READER, principal({ org: "org-inside", permissions: ["databases:read"], plan: "enterprise" }));
  gw = await startGateway(stubs);
  db = await newDatabase("inside");
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("roles", () => {
  it("POST 201 with the role and its password (shown once); GET lists it beside dbadmin with page meta", async () => {
    const res = await post(`/v1/databases/${db}/roles`, { name: "bi_reader" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toEqual({
      name: "bi_reader",
      login: true,
      create_db: false,
      create_role: false,
      builtin: false,
      created_at: "2025-03-01T10:00:00.000Z",
      password: "a-generated-password-of-32-chars",
      connection_string: `postgresql://bi_reader:a-generated-password-of-32-chars@${db}.db.example.test:6432/defaultdb?sslmode=require`,
    });
    expect(seen("createRole").at(-1)).toMatchObject({ organizationId: "org-inside", databaseId: db, name: "bi_reader" });
    const list = await get(`/v1/databases/${db}/roles?per_page=1&page=2`);
    expect(list.status).toBe(200);
    expect(list.body.data.roles).toEqual([
      { name: "dbadmin", login: true, create_db: true, create_role: true, builtin: true, created_at: null },
    ]);
    expect(list.body.meta).toMatchObject({ page: 2, per_page: 1, total: 2, total_pages: 2 });
  });

  it("422 naming `name` for a name that is not a plain identifier, before the service is asked", async () => {
    const before = seen("createRole").length;
    for (const name of ["Bad", "a-b", "1x", "", "x".repeat(64)]) {
      const res = await post(`/v1/databases/${db}/roles`, { name });
      expect(res.status, name).toBe(422);
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(["name"]);
    }
    expect(seen("createRole").length).toBe(before);
    // A rule only the service knows (pg_ and dbaas_ prefixes, reserved words) is 422 naming the field too.
    const reserved = await post(`/v1/databases/${db}/roles`, { name: "pg_monitor" });
    expect(reserved.status).toBe(422);
    expect(reserved.body.error.details).toEqual([{ field: "name", message: expect.stringContaining("must not start with pg_ or dbaas_") }]);
  });

  it("409 for a taken name and for dbadmin's deletion; 404 for an unknown role or a name that cannot be one", async () => {
    expect((await post(`/v1/databases/${db}/roles`, { name: "bi_reader" })).status).toBe(409);
    const own = await del(`/v1/databases/${db}/roles/dbadmin`);
    expect(own.status).toBe(409);
    expect(own.body.error.code).toBe("resource_conflict");
    expect((await del(`/v1/databases/${db}/roles/nobody`)).status).toBe(404);
    const bad = await del(`/v1/databases/${db}/roles/Not-A-Role`);
    expect(bad.status).toBe(404);
    expect(bad.body.error.message).toBe("role not found");
  });

  it("reset-password 200 with a new password; DELETE 204", async () => {
    const reset = await post(`/v1/databases/${db}/roles/bi_reader/reset-password`);
    expect(reset.status, reset.text).toBe(200);
    expect(reset.body.data).toMatchObject({ name: "bi_reader", password: expect.any(String), connection_string: expect.any(String) });
    const gone = await del(`/v1/databases/${db}/roles/bi_reader`);
    expect(gone.status).toBe(204);
    expect(gone.text).toBe("");
    expect((await get(`/v1/databases/${db}/roles`)).body.data.roles.map((r: { name: string }) => r.name)).toEqual(["dbadmin"]);
  });

  it("409 naming the status while the database does not run", async () => {
    const stopped = await newDatabase("stopped-one", "stopped");
    const res = await get(`/v1/databases/${stopped}/roles`);
    expect(res.status).toBe(409);
    expect(res.body.error.message).toBe("the database is stopped: roles can be managed only while it is running");
  });
});

describe("logical databases", () => {
  it("POST 201 (owner defaults to dbadmin), GET lists with page meta, DELETE 204", async () => {
    const made = await post(`/v1/databases/${db}/dbs`, { name: "analytics" });
    expect(made.status, made.text).toBe(201);
    expect(made.body.data).toEqual({ name: "analytics", owner: "dbadmin", size_bytes: 7_500_000, builtin: false });
    expect(seen("createDb").at(-1)).toMatchObject({ name: "analytics", owner: "" });
    const list = await get(`/v1/databases/${db}/dbs`);
    expect(list.body.data.dbs.map((d: { name: string }) => d.name)).toEqual(["analytics", "defaultdb"]);
    expect(list.body.meta).toMatchObject({ total: 2, page: 1 });
    expect((await del(`/v1/databases/${db}/dbs/analytics`)).status).toBe(204);
  });

  it("422 naming `owner` for an owner that is no role; 409 for defaultdb; 404 for an unknown one", async () => {
    const res = await post(`/v1/databases/${db}/dbs`, { name: "x", owner: "ghost" });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "owner", message: "no role ghost exists in the database" }]);
    const extra = await post(`/v1/databases/${db}/dbs`, { name: "x", encoding: "LATIN1" });
    expect(extra.status).toBe(422);
    expect((await del(`/v1/databases/${db}/dbs/defaultdb`)).status).toBe(409);
    expect((await del(`/v1/databases/${db}/dbs/never`)).status).toBe(404);
  });
});

describe("configuration", () => {
  const patch = (path: string, body: unknown, token = TOKEN) => api(gw.url, path, { method: "PATCH", token, body });

  it("GET: every parameter with value, default, unit, type, bounds and restart flags", async () => {
    const res = await get(`/v1/databases/${db}/config`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.parameters[0]).toEqual({
      name: "work_mem",
      value: 1092,
      default: 1092,
      unit: "kB",
      type: "integer",
      min: 64,
      max: 262144,
      allowed: null,
      requires_restart: false,
      pending_restart: false,
      overridden: false,
      description: "the stub's work_mem",
    });
    expect(res.body.data.parameters[2]).toMatchObject({ name: "jit", value: true, unit: null, min: null, max: null });
  });

  it("PATCH carries numbers, strings, booleans, lists and null to the service; answers the new configuration", async () => {
    const res = await patch(`/v1/databases/${db}/config`, { parameters: { work_mem: "64MB", max_connections: 40, jit: null } });
    expect(res.status, res.text).toBe(200);
    const sent = seen("updateConfig").at(-1) as { parameters: Record<string, { kind: { case: string; value: unknown } }> };
    expect(Object.fromEntries(Object.entries(sent.parameters).map(([k, v]) => [k, v.kind.case]))).toEqual({
      work_mem: "stringValue",
      max_connections: "numberValue",
      jit: "nullValue",
    });
    expect(res.body.data.parameters[1]).toMatchObject({ name: "max_connections", value: 40, pending_restart: true, overridden: true });
  });

  it("422 naming each refused parameter (the service's rule); the gateway's own bounds first", async () => {
    const res = await patch(`/v1/databases/${db}/config`, { parameters: { max_connections: 999, archive_command: "x" } });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual([
      "parameters.max_connections",
      "parameters.archive_command",
    ]);
    const before = seen("updateConfig").length;
    for (const body of [
      { parameters: {} },
      { parameters: { work_mem: { nested: 1 } } },
      { parameters: { work_mem: "x".repeat(201) } },
      {},
    ]) {
      const bad = await patch(`/v1/databases/${db}/config`, body);
      expect(bad.status, JSON.stringify(body)).toBe(422);
    }
    expect(seen("updateConfig").length).toBe(before);
  });

  it("a reader sees it but cannot change it; another organization's is 404", async () => {
    expect((await get(`/v1/databases/${db}/config`, READER)).status).toBe(200);
    expect((await patch(`/v1/databases/${db}/config`, { parameters: { jit: false } }, READER)).status).toBe(403);
    expect((await get(`/v1/databases/${db}/config`, OTHER)).status).toBe(404);
  });
});

describe("extensions", () => {
  it("GET lists what the server offers with installed, trusted and allowed; ?db= names the logical database", async () => {
    const res = await get(`/v1/databases/${db}/extensions?db=analytics_x`);
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "db", message: "database analytics_x does not exist" }]);
    const list = await get(`/v1/databases/${db}/extensions`);
    expect(list.status).toBe(200);
    expect(list.body.data.extensions[0]).toEqual({
      name: "pg_trgm",
      default_version: "1.6",
      installed_version: null,
      installed: false,
      trusted: true,
      allowed: true,
      description: "the stub's pg_trgm",
    });
    expect(list.body.meta).toMatchObject({ total: 3 });
  });

  it("POST 201 installs one of the allowlist; another is 422 naming `name`; DELETE 204, then 404", async () => {
    const made = await post(`/v1/databases/${db}/extensions`, { name: "pg_trgm" });
    expect(made.status, made.text).toBe(201);
    expect(made.body.data).toMatchObject({ name: "pg_trgm", installed: true, installed_version: "1.6" });
    const refused = await post(`/v1/databases/${db}/extensions`, { name: "plpython3u" });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details[0].field).toBe("name");
    expect((await post(`/v1/databases/${db}/extensions`, { name: "Not An Extension" })).status).toBe(422);
    expect((await del(`/v1/databases/${db}/extensions/pg_trgm?db=defaultdb`)).status).toBe(204);
    expect(seen("deleteExtension").at(-1)).toMatchObject({ name: "pg_trgm", db: "defaultdb" });
    expect((await del(`/v1/databases/${db}/extensions/pg_trgm`)).status).toBe(404);
    expect((await del(`/v1/databases/${db}/extensions/Bad%20Name`)).status).toBe(404);
  });
});

describe("who may", () => {
  it("another organization's database is 404; a reader lists but cannot change (403)", async () => {
    expect((await get(`/v1/databases/${db}/roles`, OTHER)).status).toBe(404);
    expect((await post(`/v1/databases/${db}/dbs`, { name: "theirs" }, OTHER)).status).toBe(404);
    expect((await get(`/v1/databases/${db}/dbs`, READER)).status).toBe(200);
    const refused = await post(`/v1/databases/${db}/roles`, { name: "sneaky" }, READER);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("insufficient_permissions");
  });
});

describe("logs", () => {
  it("GET answers the newest entries, newest last, with cursors; filters pass on; a cursor pages and tails", async () => {
    const res = await get(`/v1/databases/${db}/logs`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.entries).toHaveLength(4);
    expect(res.body.data.entries[1]).toEqual({
      time: "2025-03-01T10:00:01.000Z",
      severity: "ERROR",
      message: 'relation "no_such_table" does not exist',
      detail: null,
      hint: null,
      context: null,
      statement: "SELECT * FROM no_such_table",
      sql_state: "42P01",
      user: "dbadmin",
      database: "defaultdb",
      application_name: null,
      backend_type: "client backend",
      pid: 101,
    });
    expect(res.body.data.entries[0].sql_state).toBeNull();
    expect(res.body.data).toMatchObject({ next_cursor: "a4", prev_cursor: null });

    const errors = await get(`/v1/databases/${db}/logs?severity=error&q=NO_SUCH&limit=5&since=2025-03-01T00:00:00Z`);
    expect(errors.status, errors.text).toBe(200);
    expect(errors.body.data.entries.map((e: { sql_state: string }) => e.sql_state)).toEqual(["42P01"]);
    expect(seen("listLogs").at(-1)).toMatchObject({ severity: "error", q: "NO_SUCH", limit: 5, since: { seconds: 1740787200n } });

    const last = await get(`/v1/databases/${db}/logs?limit=1`);
    expect(last.body.data.entries.map((e: { message: string }) => e.message)).toEqual(["checkpoint complete"]);
    const before = await get(`/v1/databases/${db}/logs?limit=1&cursor=${last.body.data.prev_cursor}`);
    expect(before.body.data.entries.map((e: { severity: string }) => e.severity)).toEqual(["WARNING"]);
    const tail = await get(`/v1/databases/${db}/logs?cursor=${last.body.data.next_cursor}`);
    expect(tail.body.data.entries).toEqual([]);
  });

  it("422 for a severity, limit, time or cursor that cannot be; any status; 404 for another organization", async () => {
    for (const q of ["severity=loud", "limit=0", "limit=1001", "since=yesterday", "cursor=not%20one", `q=${"x".repeat(201)}`]) {
      const res = await get(`/v1/databases/${db}/logs?${q}`);
      expect(res.status, q).toBe(422);
    }
    const refused = await get(`/v1/databases/${db}/logs?cursor=zz9`);
    expect(refused.status).toBe(422);
    expect(refused.body.error.details[0].field).toBe("cursor");
    const stopped = await newDatabase("stopped-logs", "stopped");
    expect((await get(`/v1/databases/${stopped}/logs`)).status).toBe(200);
    expect((await get(`/v1/databases/${db}/logs`, OTHER)).status).toBe(404);
  });
});

describe("query insights", () => {
  it("GET orders by total_time (default), mean_time or calls; 422 for another order; reset 204 empties them", async () => {
    const res = await get(`/v1/databases/${db}/queries`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.queries[0]).toEqual({
      query_id: "42",
      query: "SELECT count(*) FROM orders",
      calls: 3,
      total_time_ms: 1500,
      mean_time_ms: 500,
      min_time_ms: 0,
      max_time_ms: 0,
      rows: 3,
      cache_hit_ratio: null,
      user: "dbadmin",
      database: "defaultdb",
    });
    expect(res.body.data.stats_reset).toBe("2025-03-01T10:00:00.000Z");
    const byCalls = await get(`/v1/databases/${db}/queries?order_by=calls&limit=1`);
    expect(byCalls.body.data.queries.map((q: { calls: number }) => q.calls)).toEqual([900]);
    expect(byCalls.body.data.queries[0].cache_hit_ratio).toBe(0.99);
    expect(seen("listQueries").at(-1)).toMatchObject({ orderBy: "calls", limit: 1 });
    expect((await get(`/v1/databases/${db}/queries?order_by=rows`)).status).toBe(422);
    expect((await get(`/v1/databases/${db}/queries?limit=101`)).status).toBe(422);

    const stopped = await newDatabase("stopped-queries", "stopped");
    expect((await get(`/v1/databases/${stopped}/queries`)).status).toBe(409);
    const reader = await post(`/v1/databases/${db}/queries/reset`, {}, READER);
    expect(reader.status).toBe(403);
    expect((await post(`/v1/databases/${db}/queries/reset`, {}, OTHER)).status).toBe(404);
    expect((await post(`/v1/databases/${db}/queries/reset`)).status).toBe(204);
    expect((await get(`/v1/databases/${db}/queries`)).body.data.queries).toEqual([]);
  });
});
