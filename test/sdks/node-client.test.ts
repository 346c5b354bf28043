/**
 * The Node client's HTTP behaviour against a tiny local server scripted per
 * test (the boundary under test): retries of 429/503 after Retry-After with
 * the same Idempotency-Key, bounded; error envelopes as DbaasError; rate-limit
 * headers; pages; an unreachable API as DbaasConnectionError. The real API is
 * exercised by test/sdks/node.test.ts.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { DbaasClient, DbaasConnectionError, DbaasError, DbaasWaitError } from "../../sdks/node/src/index.ts";

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

let server: Server | undefined;

/** Serves the scripted answers in order (the last one repeats) and records every request. */
async function serve(answers: Array<(res: ServerResponse) => void>): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      answers[Math.min(seen.length - 1, answers.length - 1)]!(res);
    });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

afterEach(async () => {
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

const RATE = { "x-ratelimit-limit": "60", "x-ratelimit-remaining": "41", "x-ratelimit-reset": "1767225600" };

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (res: ServerResponse) => {
    res.writeHead(status, { "content-type": "application/json", "x-request-id": "req_test", ...RATE, ...headers });
    res.end(JSON.stringify(body));
  };

const apiError = (status: number, code: string, headers: Record<string, string> = {}, details: unknown[] = []) =>
  json(status, { error: { code, message: `${code} happened`, details }, meta: { request_id: "req_err" } }, headers);

const STATUS = { data: { id: "db-1", status: "running" }, meta: { request_id: "req_ok" } };

/** A client whose retry waits are recorded (in ms) instead of slept. */
function recording(opts: ConstructorParameters<typeof DbaasClient>[0]): { client: DbaasClient; waits: number[] } {
  const waits: number[] = [];
  const client = new DbaasClient({
    ...opts,
    sleep: async (ms) => {
      waits.push(ms);
    },
  });
  return { client, waits };
}

describe("retries", () => {
  it("retries a 429 and a 503 after their Retry-After with the same Idempotency-Key, then returns the data", async () => {
    const { url, seen } = await serve([
      apiError(429, "rate_limit_exceeded", { "retry-after": "1" }),
      apiError(503, "service_unavailable", { "retry-after": "1" }),
      json(200, STATUS),
    ]);
    const { client, waits } = recording({ baseUrl: url, token: "dbs_x" });
    expect(await client.databases.start("db-1")).toEqual({ id: "db-1", status: "running" });
    expect(waits).toEqual([1000, 1000]);
    expect(seen.map((s) => s.method)).toEqual(["POST", "POST", "POST"]);
    const keys = seen.map((s) => s.headers["idempotency-key"]);
    expect(keys[0]).toMatch(/^[\x21-\x7e]{1,255}$/);
    expect(new Set(keys).size).toBe(1);
    expect(seen[0]!.headers.authorization).toBe("Bearer dbs_x");
  });

  it("every POST call gets its own key unless one is given; GET has none", async () => {
    const { url, seen } = await serve([json(200, STATUS)]);
    const client = new DbaasClient({ baseUrl: url });
    await client.databases.stop("db-1");
    await client.databases.stop("db-1");
    await client.databases.stop("db-1", { idempotencyKey: "mine-1" });
    await client.databases.get("db-1");
    const keys = seen.map((s) => s.headers["idempotency-key"]);
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys[2]).toBe("mine-1");
    expect(keys[3]).toBeUndefined();
  });

  it("gives up after maxRetries with the last error", async () => {
    const { url, seen } = await serve([apiError(503, "maintenance_mode", { "retry-after": "2" })]);
    const { client, waits } = recording({ baseUrl: url, maxRetries: 1 });
    const err = await client.databases.get("db-1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DbaasError);
    expect(err).toMatchObject({ status: 503, code: "maintenance_mode", retryAfter: 2, requestId: "req_err" });
    expect(seen).toHaveLength(2);
    expect(waits).toEqual([2000]);
  });

  it("without Retry-After the wait doubles: 0.5 s, 1 s, 2 s", async () => {
    const { url, seen } = await serve([apiError(503, "service_unavailable")]);
    const { client, waits } = recording({ baseUrl: url });
    await expect(client.databases.list()).rejects.toMatchObject({ status: 503 });
    expect(waits).toEqual([500, 1000, 2000]);
    expect(seen).toHaveLength(4);
  });

  it("a Retry-After given as an HTTP date is waited until that time", async () => {
    const at = new Date(Date.now() + 3000).toUTCString(); // whole seconds: 2-3 s from now
    const { url } = await serve([apiError(503, "maintenance_mode", { "retry-after": at }), json(200, STATUS)]);
    const { client, waits } = recording({ baseUrl: url });
    expect(await client.databases.get("db-1")).toEqual(STATUS.data);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThan(1000);
    expect(waits[0]).toBeLessThanOrEqual(3000);
  });

  it("maxRetries 0 never retries", async () => {
    const { url, seen } = await serve([apiError(429, "rate_limit_exceeded", { "retry-after": "1" })]);
    const { client, waits } = recording({ baseUrl: url, maxRetries: 0 });
    await expect(client.databases.get("db-1")).rejects.toMatchObject({ status: 429 });
    expect(seen).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it("a Retry-After beyond maxRetryWaitMs is thrown at once, not waited", async () => {
    const { url, seen } = await serve([apiError(429, "rate_limit_exceeded", { "retry-after": "3600" })]);
    const { client, waits } = recording({ baseUrl: url, maxRetryWaitMs: 10_000 });
    await expect(client.databases.list()).rejects.toMatchObject({ status: 429, retryAfter: 3600 });
    expect(seen).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it("a POST's 409 with Retry-After (its first attempt still running) is retried with the same key; without, thrown", async () => {
    const running = apiError(409, "resource_conflict", { "retry-after": "1" });
    const replayed = json(200, STATUS, { "idempotent-replayed": "true" });
    const { url, seen } = await serve([running, replayed, apiError(409, "resource_conflict")]);
    const { client, waits } = recording({ baseUrl: url });
    expect(await client.databases.restart("db-1")).toEqual(STATUS.data);
    expect(waits).toEqual([1000]);
    expect(client.lastResponse?.replayed).toBe(true);
    expect(seen[0]!.headers["idempotency-key"]).toBe(seen[1]!.headers["idempotency-key"]);
    await expect(client.databases.stop("db-1")).rejects.toMatchObject({ status: 409, code: "resource_conflict" });
    expect(seen).toHaveLength(3);
  });

  it("other errors are not retried; the envelope becomes a typed DbaasError", async () => {
    const details = [{ field: "name", message: "must be 3-63 characters" }];
    const { url, seen } = await serve([apiError(422, "validation_error", {}, details)]);
    const client = new DbaasClient({ baseUrl: url });
    const err = (await client.databases.create({ name: "x", region: "fsn1", tier: "micro" }).catch((e: unknown) => e)) as DbaasError;
    expect(err).toBeInstanceOf(DbaasError);
    expect(err).toMatchObject({
      status: 422,
      code: "validation_error",
      message: "validation_error happened",
      details,
      requestId: "req_err",
    });
    expect(seen).toHaveLength(1);
    expect(JSON.parse(seen[0]!.body)).toEqual({ name: "x", region: "fsn1", tier: "micro" });
  });

  it("an answer without the envelope (a proxy's page) is a DbaasError too", async () => {
    const { url } = await serve([
      (res) => {
        res.writeHead(502, { "content-type": "text/html" });
        res.end("<html>bad gateway</html>");
      },
    ]);
    await expect(new DbaasClient({ baseUrl: url }).databases.get("db-1")).rejects.toMatchObject({
      status: 502,
      code: "unexpected_response",
    });
  });
});

describe("configuration", () => {
  it("the base URL and the credential default to DBAAS_URL and DBAAS_TOKEN; an API key is a bearer credential too", async () => {
    const { url, seen } = await serve([json(200, STATUS)]);
    const saved = { url: process.env.DBAAS_URL, token: process.env.DBAAS_TOKEN };
    try {
      process.env.DBAAS_URL = `${url}/`;
      process.env.DBAAS_TOKEN = "dbk_from_env";
      const client = new DbaasClient();
      expect(client.baseUrl).toBe(url);
      await client.databases.get("db-1");
      await new DbaasClient({ token: "dbs_given" }).databases.get("db-1");
      const other = new DbaasClient();
      other.setToken("dbs_later");
      await other.databases.get("db-1");
    } finally {
      for (const [k, v] of [
        ["DBAAS_URL", saved.url],
        ["DBAAS_TOKEN", saved.token],
      ] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    expect(seen.map((s) => s.headers.authorization)).toEqual(["Bearer dbk_from_env", "Bearer dbs_given", "Bearer dbs_later"]);
  });
});

describe("responses", () => {
  it("keeps the last response's rate limit and request id, errors included", async () => {
    const { url } = await serve([json(200, STATUS), apiError(404, "not_found", { "x-ratelimit-remaining": "40" })]);
    const client = new DbaasClient({ baseUrl: url });
    await client.databases.get("db-1");
    expect(client.lastResponse).toMatchObject({
      status: 200,
      requestId: "req_test",
      rateLimit: { limit: 60, remaining: 41, reset: 1767225600 },
    });
    await client.databases.get("db-2").catch(() => {});
    expect(client.lastResponse).toMatchObject({ status: 404, rateLimit: { remaining: 40 } });
  });

  it("pages: await gives one page, for await walks them all", async () => {
    const page = (n: number, ids: string[]) =>
      json(200, {
        data: { databases: ids.map((id) => ({ id })) },
        meta: { request_id: "r", page: n, per_page: 2, total: 3, total_pages: 2 },
      });
    const { url, seen } = await serve([page(1, ["db-1", "db-2"]), page(2, ["db-3"]), page(1, ["db-1", "db-2"])]);
    const client = new DbaasClient({ baseUrl: url });
    const ids: string[] = [];
    for await (const db of client.databases.list({ per_page: 2, status: "running" })) ids.push(db.id);
    expect(ids).toEqual(["db-1", "db-2", "db-3"]);
    expect(seen.map((s) => s.url)).toEqual([
      "/v1/databases?per_page=2&status=running&page=1",
      "/v1/databases?per_page=2&status=running&page=2",
    ]);
    const first = await client.databases.list({ per_page: 2 });
    expect(first.items.map((d) => d.id)).toEqual(["db-1", "db-2"]);
    expect(first.meta.total_pages).toBe(2);
  });

  it("a GET or POST without an answer is sent again (the POST with its key); a DELETE is not", async () => {
    const hangUp = (res: ServerResponse) => res.socket!.destroy();
    const { url, seen } = await serve([hangUp, json(200, STATUS), hangUp, json(200, STATUS), hangUp]);
    const { client, waits } = recording({ baseUrl: url });
    expect(await client.databases.get("db-1")).toEqual(STATUS.data);
    expect(await client.databases.restart("db-1")).toEqual(STATUS.data);
    expect(seen[2]!.headers["idempotency-key"]).toBe(seen[3]!.headers["idempotency-key"]);
    await expect(client.databases.delete("db-1")).rejects.toBeInstanceOf(DbaasConnectionError);
    expect(seen.map((s) => s.method)).toEqual(["GET", "GET", "POST", "POST", "DELETE"]);
    expect(waits).toEqual([500, 500]);
  });

  it("an API nobody answers at is a DbaasConnectionError", async () => {
    const { url } = await serve([json(200, STATUS)]);
    await new Promise((r) => server!.close(r));
    server = undefined;
    const err = await new DbaasClient({ baseUrl: url, maxRetries: 0 }).databases.get("db-1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DbaasConnectionError);
    expect((err as Error).message).toContain("ECONNREFUSED");
  });
});

describe("databases.waitForStatus", () => {
  const db = (status: string, extra: Record<string, string> = {}) =>
    json(200, { data: { id: "db-1", status, ...extra }, meta: { request_id: "r" } });

  it("polls until the status, telling each change once", async () => {
    const { url, seen } = await serve([db("provisioning"), db("provisioning"), db("starting"), db("running")]);
    const statuses: string[] = [];
    const ready = await new DbaasClient({ baseUrl: url }).databases.waitForStatus("db-1", "running", {
      intervalMs: 5,
      onStatus: (s) => statuses.push(s),
    });
    expect(ready).toEqual({ id: "db-1", status: "running" });
    expect(statuses).toEqual(["provisioning", "starting", "running"]);
    expect(seen).toHaveLength(4);
  });

  it("ends with DbaasWaitError at failed (with the reason), at a 404, and at the timeout (with the last status)", async () => {
    const { url } = await serve([
      db("failed", { status_reason: "no capacity in fsn1" }),
      apiError(404, "resource_not_found"),
      db("stopping"),
    ]);
    const client = new DbaasClient({ baseUrl: url });
    const failed = await client.databases.waitForStatus("db-1", "running", { intervalMs: 5 }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(DbaasWaitError);
    expect(failed).toMatchObject({ lastStatus: "failed", message: expect.stringContaining("no capacity in fsn1") });
    const gone = await client.databases.waitForStatus("db-1", "running", { intervalMs: 5 }).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(DbaasWaitError);
    expect((gone as Error).message).toContain("no longer exists");
    const late = await client.databases.waitForStatus("db-1", "stopped", { timeoutMs: 0 }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(DbaasWaitError);
    expect(late).toMatchObject({ lastStatus: "stopping" });
  });
});

describe("high availability", () => {
  const HA = {
    standbys: 1,
    synchronous: true,
    members: [
      { id: "node-p", role: "primary", status: "running", region: "fsn1", lag_bytes: 0 },
      { id: "node-s", role: "standby", status: "running", region: "fsn1", lag_bytes: 0 },
    ],
    last_failover: null,
  };
  const OP = { id: "op-1", type: "failover", status: "running", reason: "planned switchover requested", from: "node-p", to: "node-s" };

  it("get, set (PUT, no Idempotency-Key) and failover (POST, with one) name the database; create carries standbys", async () => {
    const { url, seen } = await serve([
      json(200, { data: HA, meta: { request_id: "r" } }),
      json(200, { data: HA, meta: { request_id: "r" } }),
      json(202, { data: OP, meta: { request_id: "r" } }),
      json(201, { data: { id: "db-2", status: "provisioning" }, meta: { request_id: "r" } }),
    ]);
    const client = new DbaasClient({ baseUrl: url });
    expect(await client.databases.getHighAvailability("db-1")).toEqual(HA);
    expect(await client.databases.setHighAvailability("db-1", { standbys: 1, synchronous: true })).toEqual(HA);
    expect(await client.databases.failover("db-1")).toEqual(OP);
    await client.databases.create({ name: "orders", region: "fsn1", tier: "micro", standbys: 1, synchronous: true });
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      "GET /v1/databases/db-1/high-availability ",
      'PUT /v1/databases/db-1/high-availability {"standbys":1,"synchronous":true}',
      "POST /v1/databases/db-1/failover ",
      'POST /v1/databases {"name":"orders","region":"fsn1","tier":"micro","standbys":1,"synchronous":true}',
    ]);
    expect(seen[1]!.headers["idempotency-key"]).toBeUndefined();
    expect(seen[2]!.headers["idempotency-key"]).toBeTruthy();
  });

  it("a 409 (no healthy standby) is a DbaasError with the reason", async () => {
    const { url } = await serve([apiError(409, "conflict")]);
    const err = await new DbaasClient({ baseUrl: url }).databases.failover("db-1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DbaasError);
    expect(err).toMatchObject({ status: 409, code: "conflict" });
  });
});

describe("replicas", () => {
  const REPLICA = { id: "rep-1", database_id: "db-1", status: "provisioning", lag_bytes: 0 };
  const data = (d: unknown) => json(200, { data: d, meta: { request_id: "r" } });

  it("names the database and the replica in each path; promote answers the new database", async () => {
    const noContent = (res: ServerResponse) => {
      res.writeHead(204, { "x-request-id": "r", ...RATE });
      res.end();
    };
    const promoted = { id: "db-2", name: "reports", status: "starting" };
    const { url, seen } = await serve([json(201, { data: REPLICA, meta: { request_id: "r" } }), data(REPLICA), noContent, data(promoted)]);
    const client = new DbaasClient({ baseUrl: url });
    expect(await client.replicas.create("db-1", { name: "reports", region: "hel1" })).toEqual(REPLICA);
    expect(await client.replicas.get("db-1", "rep-1")).toEqual(REPLICA);
    expect(await client.replicas.delete("db-1", "rep-1")).toBeUndefined();
    expect(await client.replicas.promote("db-1", "rep-1")).toEqual(promoted);
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      'POST /v1/databases/db-1/replicas {"name":"reports","region":"hel1"}',
      "GET /v1/databases/db-1/replicas/rep-1 ",
      "DELETE /v1/databases/db-1/replicas/rep-1 ",
      "POST /v1/databases/db-1/replicas/rep-1/promote ",
    ]);
    expect(seen[0]!.headers["idempotency-key"]).toBeTruthy();
    expect(seen[3]!.headers["idempotency-key"]).toBeTruthy();
  });

  it("list: await gives a page, for await walks every page", async () => {
    const page = (n: number, ids: string[]) =>
      json(200, {
        data: { replicas: ids.map((id) => ({ id })) },
        meta: { request_id: "r", page: n, per_page: 1, total: 2, total_pages: 2 },
      });
    const { url, seen } = await serve([page(1, ["rep-1"]), page(2, ["rep-2"])]);
    const ids: string[] = [];
    for await (const r of new DbaasClient({ baseUrl: url }).replicas.list("db-1", { per_page: 1 })) ids.push(r.id);
    expect(ids).toEqual(["rep-1", "rep-2"]);
    expect(seen.map((s) => s.url)).toEqual([
      "/v1/databases/db-1/replicas?per_page=1&page=1",
      "/v1/databases/db-1/replicas?per_page=1&page=2",
    ]);
  });

  it("waitForStatus follows the replica to running, and stops at failed with the reason", async () => {
    const { url } = await serve([data(REPLICA), data({ ...REPLICA, status: "running" })]);
    const statuses: string[] = [];
    const client = new DbaasClient({ baseUrl: url });
    const ready = await client.replicas.waitForStatus("db-1", "rep-1", "running", { intervalMs: 5, onStatus: (s) => statuses.push(s) });
    expect(ready.status).toBe("running");
    expect(statuses).toEqual(["provisioning", "running"]);
    await new Promise((r) => server!.close(r));
    const failed = await serve([data({ ...REPLICA, status: "failed", status_reason: "the seed backup failed 3 times" })]);
    const err = await new DbaasClient({ baseUrl: failed.url }).replicas
      .waitForStatus("db-1", "rep-1", "running", { intervalMs: 5 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DbaasWaitError);
    expect((err as Error).message).toContain("the seed backup failed 3 times");
  });
});

describe("trusted sources and the pooler", () => {
  const SOURCE = { id: "ts-1", cidr: "203.0.113.0/24", description: "", expires_at: null, created_at: "2026-01-01T00:00:00Z" };
  const POOLER = { enabled: true, mode: "session", pool_size: 10, max_client_connections: 1000 };
  const data = (status: number, d: unknown) => json(status, { data: d, meta: { request_id: "r" } });

  it("names the database in each path and sends only the fields given", async () => {
    const noContent = (res: ServerResponse) => {
      res.writeHead(204, { "x-request-id": "r", ...RATE });
      res.end();
    };
    const { url, seen } = await serve([data(201, SOURCE), noContent, data(200, POOLER), data(200, POOLER)]);
    const client = new DbaasClient({ baseUrl: url });
    expect(await client.trustedSources.add("db-1", { cidr: "203.0.113.0/24", expires_at: "2030-01-01T00:00:00Z" })).toEqual(SOURCE);
    expect(await client.trustedSources.remove("db-1", "ts-1")).toBeUndefined();
    expect(await client.pooler.get("db-1")).toEqual(POOLER);
    expect(await client.pooler.update("db-1", { mode: "session", pool_size: 10 })).toEqual(POOLER);
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      'POST /v1/databases/db-1/trusted-sources {"cidr":"203.0.113.0/24","expires_at":"2030-01-01T00:00:00Z"}',
      "DELETE /v1/databases/db-1/trusted-sources/ts-1 ",
      "GET /v1/databases/db-1/pooler ",
      'PATCH /v1/databases/db-1/pooler {"mode":"session","pool_size":10}',
    ]);
    expect(seen[0]!.headers["idempotency-key"]).toBeTruthy();
  });

  it("list: for await walks every page", async () => {
    const page = (n: number, ids: string[]) =>
      json(200, {
        data: { trusted_sources: ids.map((id) => ({ ...SOURCE, id })) },
        meta: { request_id: "r", page: n, per_page: 1, total: 2, total_pages: 2 },
      });
    const { url, seen } = await serve([page(1, ["ts-1"]), page(2, ["ts-2"])]);
    const ids: string[] = [];
    for await (const t of new DbaasClient({ baseUrl: url }).trustedSources.list("db-1", { per_page: 1 })) ids.push(t.id);
    expect(ids).toEqual(["ts-1", "ts-2"]);
    expect(seen.map((s) => s.url)).toEqual([
      "/v1/databases/db-1/trusted-sources?per_page=1&page=1",
      "/v1/databases/db-1/trusted-sources?per_page=1&page=2",
    ]);
  });
});

describe("inside a database: roles and dbs", () => {
  const ROLE = { name: "bi", login: true, create_db: false, create_role: false, builtin: false, created_at: null };
  const created = { ...ROLE, password: "p", connection_string: "postgresql://bi:p@h:1/defaultdb?sslmode=require" };
  const noContent = (res: ServerResponse) => {
    res.writeHead(204, { "x-request-id": "r", ...RATE });
    res.end();
  };
  const data = (status: number, d: unknown) => json(status, { data: d, meta: { request_id: "r" } });

  it("names the database and the role or db in each path, with a body only where the API takes one", async () => {
    const db = { name: "app", owner: "bi", size_bytes: 1, builtin: false };
    const { url, seen } = await serve([data(201, created), data(200, created), noContent, data(201, db), noContent]);
    const client = new DbaasClient({ baseUrl: url });
    expect(await client.roles.create("db-1", { name: "bi" })).toEqual(created);
    expect(await client.roles.resetPassword("db-1", "bi")).toEqual(created);
    expect(await client.roles.delete("db-1", "bi")).toBeUndefined();
    expect(await client.dbs.create("db-1", { name: "app", owner: "bi" })).toEqual(db);
    expect(await client.dbs.delete("db-1", "app")).toBeUndefined();
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      'POST /v1/databases/db-1/roles {"name":"bi"}',
      "POST /v1/databases/db-1/roles/bi/reset-password ",
      "DELETE /v1/databases/db-1/roles/bi ",
      'POST /v1/databases/db-1/dbs {"name":"app","owner":"bi"}',
      "DELETE /v1/databases/db-1/dbs/app ",
    ]);
    expect(seen[0]!.headers["idempotency-key"]).toBeTruthy();
  });

  it("config: get, and update with values of every type and null", async () => {
    const config = { parameters: [{ name: "work_mem", value: 65536, pending_restart: false }] };
    const { url, seen } = await serve([data(200, config), data(200, config)]);
    const client = new DbaasClient({ baseUrl: url });
    expect(await client.config.get("db-1")).toEqual(config);
    await client.config.update("db-1", {
      parameters: { work_mem: "64MB", max_connections: 40, jit: null, shared_preload_libraries: ["auto_explain"] },
    });
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      "GET /v1/databases/db-1/config ",
      'PATCH /v1/databases/db-1/config {"parameters":{"work_mem":"64MB","max_connections":40,"jit":null,"shared_preload_libraries":["auto_explain"]}}',
    ]);
  });

  it("extensions: install into a db, delete with ?db=, list with ?db=", async () => {
    const ext = {
      name: "pg_trgm",
      default_version: "1.6",
      installed_version: "1.6",
      installed: true,
      trusted: true,
      allowed: true,
      description: "",
    };
    const { url, seen } = await serve([
      data(201, ext),
      noContent,
      json(200, { data: { extensions: [ext] }, meta: { request_id: "r", page: 1, per_page: 20, total: 1, total_pages: 1 } }),
    ]);
    const client = new DbaasClient({ baseUrl: url });
    expect(await client.extensions.install("db-1", { name: "pg_trgm", db: "app" })).toEqual(ext);
    expect(await client.extensions.delete("db-1", "pg_trgm", { db: "app" })).toBeUndefined();
    expect((await client.extensions.list("db-1", { db: "app" }).all()).map((e) => e.name)).toEqual(["pg_trgm"]);
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      'POST /v1/databases/db-1/extensions {"name":"pg_trgm","db":"app"}',
      "DELETE /v1/databases/db-1/extensions/pg_trgm?db=app ",
      "GET /v1/databases/db-1/extensions?db=app&page=1 ",
    ]);
  });

  it("logs and queries: filters in the query, reset as a POST, follow polls with next_cursor", async () => {
    const entry = (message: string) => ({ time: "2026-01-01T00:00:00.000Z", severity: "LOG", message, sql_state: null });
    const { url, seen } = await serve([
      data(200, { entries: [entry("one")], next_cursor: "YQ", prev_cursor: null }),
      data(200, { queries: [{ query: "SELECT $1", calls: 3 }], stats_reset: null }),
      noContent,
      data(200, { entries: [entry("newest")], next_cursor: "Yg", prev_cursor: "Yw" }),
      data(200, { entries: [], next_cursor: "Yg", prev_cursor: "Yw" }),
      data(200, { entries: [entry("later")], next_cursor: "ZA", prev_cursor: "Yg" }),
    ]);
    const client = new DbaasClient({ baseUrl: url });
    const page = await client.logs.list("db-1", { severity: "ERROR", q: "no_such", limit: 5, since: "2026-01-01T00:00:00Z" });
    expect(page.entries.map((e) => e.message)).toEqual(["one"]);
    expect((await client.queries.list("db-1", { order_by: "calls", limit: 1 })).queries[0]!.calls).toBe(3);
    expect(await client.queries.reset("db-1")).toBeUndefined();
    const followed: string[] = [];
    const stop = new AbortController();
    for await (const e of client.logs.follow("db-1", { severity: "LOG" }, { intervalMs: 10, signal: stop.signal })) {
      followed.push(e.message);
      if (followed.length === 2) stop.abort();
    }
    expect(followed).toEqual(["newest", "later"]);
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      "GET /v1/databases/db-1/logs?severity=ERROR&q=no_such&limit=5&since=2026-01-01T00%3A00%3A00Z ",
      "GET /v1/databases/db-1/queries?order_by=calls&limit=1 ",
      "POST /v1/databases/db-1/queries/reset ",
      "GET /v1/databases/db-1/logs?severity=LOG ",
      "GET /v1/databases/db-1/logs?severity=LOG&cursor=Yg ",
      "GET /v1/databases/db-1/logs?severity=LOG&cursor=Yg ",
    ]);
  });

  it("lists walk every page", async () => {
    const page = (key: string, n: number, names: string[]) =>
      json(200, {
        data: { [key]: names.map((name) => ({ name })) },
        meta: { request_id: "r", page: n, per_page: 1, total: 2, total_pages: 2 },
      });
    const roles = await serve([page("roles", 1, ["bi"]), page("roles", 2, ["dbadmin"])]);
    const names: string[] = [];
    for await (const r of new DbaasClient({ baseUrl: roles.url }).roles.list("db-1", { per_page: 1 })) names.push(r.name);
    expect(names).toEqual(["bi", "dbadmin"]);
    expect(roles.seen.map((s) => s.url)).toEqual([
      "/v1/databases/db-1/roles?per_page=1&page=1",
      "/v1/databases/db-1/roles?per_page=1&page=2",
    ]);
    await new Promise((r) => server!.close(r));
    const dbs = await serve([page("dbs", 1, ["app"]), page("dbs", 2, ["defaultdb"])]);
    expect((await new DbaasClient({ baseUrl: dbs.url }).dbs.list("db-1").all()).map((d) => d.name)).toEqual(["app", "defaultdb"]);
  });
});

describe("the resources' surface", () => {
  const PLUMBING = ["data", "none", "bytes", "paged", "transport"];
  const RESOURCES = [
    "auth",
    "databases",
    "backups",
    "replicas",
    "trustedSources",
    "pooler",
    "roles",
    "dbs",
    "catalogue",
    "organization",
    "apiKeys",
    "billing",
  ] as const;

  /** Every property name an object shows, its own and its prototypes' up to Object's. */
  function members(o: object): string[] {
    const names: string[] = [];
    for (let p: object | null = o; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
      names.push(...Object.getOwnPropertyNames(p).filter((n) => n !== "constructor"));
    }
    return names;
  }

  it("each resource object has its API's methods and nothing else: no own keys, no plumbing on its prototypes", () => {
    const client = new DbaasClient({ baseUrl: "http://127.0.0.1:9", token: "t" });
    for (const name of RESOURCES) {
      const resource = client[name];
      expect(Object.keys(resource), name).toEqual([]);
      const shown = members(resource);
      expect(shown.length, name).toBeGreaterThan(0);
      expect(
        shown.filter((m) => PLUMBING.includes(m)),
        name,
      ).toEqual([]);
    }
  });

  it("the published declarations (dist/) give no resource class a plumbing member", () => {
    const dir = fileURLToPath(new URL("../../sdks/node/dist/resources/", import.meta.url));
    const files = readdirSync(dir).filter((f) => f.endsWith(".d.ts"));
    expect(files).toContain("databases.d.ts");
    for (const file of files) {
      const text = readFileSync(join(dir, file), "utf8");
      // Members are the indented lines of a class body; the module's own functions are not indented.
      const member = new RegExp(`^\\s+(?:(?:protected|private|public|readonly|static|abstract)\\s+)*(${PLUMBING.join("|")})\\b`, "m");
      expect(member.exec(text)?.[0], file).toBeUndefined();
    }
  });
});
