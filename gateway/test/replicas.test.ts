/**
 * Read replicas through the gateway (docs/product.md, Read replicas): how the
 * replica RPCs map onto the public JSON, and which refusals become which
 * statuses — 201/200/204 on success; 409 for a primary that is not running,
 * a sixth replica, a name in use and the promotion of a replica that is not
 * running; 402 without a payment method; 422 naming the field; 404 for a
 * replica of another database or organization; 403 without the permission.
 * Every response is checked against the OpenAPI document by `api()`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { MAX_REPLICAS, setReplicaStatus } from "./support/replicas-stub.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-replicas";
const OTHER = "tok-replicas-other-org";
const UNPAID = "tok-replicas-no-payment-method";
const READER = "tok-replicas-read-only";
let primary: string;

const post = (path: string, body?: unknown, token = TOKEN, headers?: Record<string, string>) =>
  api(gw.url, path, { method: "POST", token, body: body ?? {}, headers });
const get = (path: string, token = TOKEN) => api(gw.url, path, { token });
const del = (path: string, token = TOKEN) => api(gw.url, path, { method: "DELETE", token });
const seen = (rpc: string) => stubs.state.seen.get(rpc) ?? [];

async function newDatabase(name: string, status = "running", token = TOKEN): Promise<string> {
  const res = await post("/v1/databases", { name, region: "fsn1", tier: "micro" }, token);
  expect(res.status).toBe(201);
  stubs.state.databases.get(res.body.data.id)!.db.status = status;
  return res.body.data.id;
}

async function newReplica(databaseId: string, name: string, status = "running"): Promise<string> {
  const res = await post(`/v1/databases/${databaseId}/replicas`, { name });
  expect(res.status, res.text).toBe(201);
  setReplicaStatus(stubs.state, res.body.data.id, status);
  return res.body.data.id;
}

beforeAll(async () => {
  stubs = await startStubs();
  const tokens = stubs.state.tokens;
  tokens.set(TOKEN, principal({ org: "org-replicas", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  tokens.set(OTHER, principal({ org: "org-elsewhere", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  tokens.set(UNPAID, principal({ org: "org-unpaid", permissions: ALL_PERMISSIONS }));
  tokens.set(READER, principal({ org: "org-replicas", permissions: ["databases:read"], plan: "enterprise" }));
  gw = await startGateway(stubs);
  for (const token of [TOKEN, OTHER]) {
    expect((await post("/v1/billing/payment-methods", { type: "card", token: "tok_visa" }, token)).status).toBe(201);
  }
  primary = await newDatabase("primary");
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("POST /v1/databases/{id}/replicas", () => {
  it("201 with the replica record; tier and region default to the primary's (empty upstream)", async () => {
    const res = await post(`/v1/databases/${primary}/replicas`, { name: "  reports  " });
    expect(res.status, res.text).toBe(201);
    const id = res.body.data.id;
    expect(id).toMatch(/^rep-/);
    expect(res.body.data).toEqual({
      id,
      name: "reports",
      database_id: primary,
      region: "fsn1",
      tier: "micro",
      status: "provisioning",
      host: `${id}.db.example.test`,
      port: 6432,
      database: "defaultdb",
      username: "dbadmin",
      connection_string: `postgresql://dbadmin:********@${id}.db.example.test:6432/defaultdb?sslmode=require`,
      lag_bytes: 0,
      created_at: "2025-03-01T10:00:00.000Z",
    });
    expect(res.body.data).not.toHaveProperty("password");
    expect(seen("createReplica").at(-1)).toMatchObject({
      organizationId: "org-replicas",
      databaseId: primary,
      name: "reports",
      tier: "",
      region: "",
    });
  });

  it("passes the tier and region asked for", async () => {
    const db = await newDatabase("tiered");
    const res = await post(`/v1/databases/${db}/replicas`, { name: "faraway", tier: "small", region: "hel1" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ tier: "small", region: "hel1" });
  });

  it("with an Idempotency-Key a retry gets the first answer, and one replica is asked for", async () => {
    const db = await newDatabase("idempotent");
    const headers = { "Idempotency-Key": "replica-create-1" };
    const first = await post(`/v1/databases/${db}/replicas`, { name: "once" }, TOKEN, headers);
    const before = seen("createReplica").length;
    const again = await post(`/v1/databases/${db}/replicas`, { name: "once" }, TOKEN, headers);
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data).toEqual(first.body.data);
    expect(seen("createReplica")).toHaveLength(before);
  });

  it("409 naming the primary's status when it is not running", async () => {
    const db = await newDatabase("asleep", "stopped");
    const res = await post(`/v1/databases/${db}/replicas`, { name: "rep1" });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("resource_conflict");
    expect(res.body.error.message).toContain("stopped");
  });

  it(`409 for a replica beyond ${MAX_REPLICAS}, and for a name the primary's replicas already use`, async () => {
    const db = await newDatabase("crowded");
    for (let i = 1; i <= MAX_REPLICAS; i++) await newReplica(db, `rep${i}`);
    const sixth = await post(`/v1/databases/${db}/replicas`, { name: "rep6" });
    expect(sixth.status).toBe(409);
    expect(sixth.body.error).toMatchObject({ code: "resource_conflict", message: expect.stringContaining(`${MAX_REPLICAS}`) });

    const other = await newDatabase("named");
    await newReplica(other, "twin");
    const twin = await post(`/v1/databases/${other}/replicas`, { name: "twin" });
    expect(twin.status).toBe(409);
    expect(twin.body.error.code).toBe("resource_conflict");
  });

  it("402 without a payment method: a replica costs money", async () => {
    const db = await newDatabase("unpaid", "running", UNPAID);
    const res = await post(`/v1/databases/${db}/replicas`, { name: "rep1" }, UNPAID);
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe("payment_required");
  });

  it("422 naming each field the gateway refuses, before the service is asked", async () => {
    const before = seen("createReplica").length;
    const cases: Array<[unknown, string]> = [
      [{ name: "rep1", tier: "huge" }, "tier"],
      [{ name: "rep1", region: "mars1" }, "region"],
      [{ name: "ab" }, "name"],
      [{}, "name"],
      [{ name: "rep1", password: "x" }, "password"],
    ];
    for (const [body, field] of cases) {
      const res = await post(`/v1/databases/${primary}/replicas`, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.error.code).toBe("validation_error");
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    expect(seen("createReplica")).toHaveLength(before);
  });

  it("422 with the service's field when only it knows the rule", async () => {
    const res = await post(`/v1/databases/${primary}/replicas`, { name: "stub-refuses" });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "name", message: "must be 3-63 characters" }]);
  });

  it("404 for another organization's database, and 403 without databases:write", async () => {
    expect((await post(`/v1/databases/${primary}/replicas`, { name: "rep1" }, OTHER)).status).toBe(404);
    const denied = await post(`/v1/databases/${primary}/replicas`, { name: "rep1" }, READER);
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe("insufficient_permissions");
  });
});

describe("GET /v1/databases/{id}/replicas", () => {
  it("200: the standard list shape, each item the full record, with lag and why one failed", async () => {
    const db = await newDatabase("listed");
    const ok = await newReplica(db, "okay");
    const broken = await newReplica(db, "broken");
    stubs.state.replicas.get(ok)!.lagBytes = 4096n;
    setReplicaStatus(stubs.state, broken, "failed", "the seed backup failed 3 times: disk full");
    const res = await get(`/v1/databases/${db}/replicas`, READER);
    expect(res.status).toBe(200);
    expect(res.body.meta).toEqual({ request_id: expect.any(String), page: 1, per_page: 20, total: 2, total_pages: 1 });
    const [first, second] = res.body.data.replicas;
    expect(first).toMatchObject({ id: ok, status: "running", lag_bytes: 4096 });
    expect(first).not.toHaveProperty("status_reason");
    expect(second).toMatchObject({ id: broken, status: "failed", status_reason: "the seed backup failed 3 times: disk full" });
  });

  it("pages like every list: bounds checked here, the page passed on", async () => {
    const res = await get(`/v1/databases/${primary}/replicas?per_page=1&page=2`);
    expect(res.status).toBe(200);
    expect(seen("listReplicas").at(-1)).toMatchObject({ organizationId: "org-replicas", databaseId: primary, page: 2, perPage: 1 });
    const before = seen("listReplicas").length;
    expect((await get(`/v1/databases/${primary}/replicas?per_page=101`)).status).toBe(422);
    expect((await get(`/v1/databases/${primary}/replicas?page=abc`)).status).toBe(400);
    expect(seen("listReplicas")).toHaveLength(before);
  });

  it("404 for another organization's database", async () => {
    const res = await get(`/v1/databases/${primary}/replicas`, OTHER);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("resource_not_found");
  });
});

describe("GET and DELETE /v1/databases/{id}/replicas/{rid}", () => {
  it("200 with the record, to a reader too", async () => {
    const id = await newReplica(primary, "single");
    const res = await get(`/v1/databases/${primary}/replicas/${id}`, READER);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id, name: "single", database_id: primary, status: "running" });
  });

  it("404 for a replica of another database, of another organization, or an id that is not a replica's", async () => {
    const id = await newReplica(primary, "mine");
    const elsewhere = await newDatabase("sibling");
    for (const [path, token] of [
      [`/v1/databases/${elsewhere}/replicas/${id}`, TOKEN],
      [`/v1/databases/${primary}/replicas/${id}`, OTHER],
      [`/v1/databases/${primary}/replicas/${primary}`, TOKEN],
      [`/v1/databases/${primary}/replicas/rep-doesnotexist`, TOKEN],
    ] as const) {
      for (const res of [await get(path, token), await del(path, token), await post(`${path}/promote`, undefined, token)]) {
        expect(res.status, path).toBe(404);
        expect(res.body.error.code).toBe("resource_not_found");
      }
    }
    expect(stubs.state.replicas.has(id)).toBe(true);
  });

  it("204, then the replica is gone; 403 without databases:write", async () => {
    const id = await newReplica(primary, "doomed");
    expect((await del(`/v1/databases/${primary}/replicas/${id}`, READER)).status).toBe(403);
    const res = await del(`/v1/databases/${primary}/replicas/${id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect((await get(`/v1/databases/${primary}/replicas/${id}`)).status).toBe(404);
  });
});

describe("POST /v1/databases/{id}/replicas/{rid}/promote", () => {
  it("200 with the new database exactly as GET /v1/databases/{id} shows it, no password; the replica is gone", async () => {
    const db = await newDatabase("promoting");
    const id = await newReplica(db, "promoted");
    const res = await post(`/v1/databases/${db}/replicas/${id}/promote`);
    expect(res.status, res.text).toBe(200);
    const promoted = res.body.data;
    expect(promoted.id).toMatch(/^db-/);
    expect(promoted).toMatchObject({ name: "promoted", status: "starting", tier: "micro", region: "fsn1" });
    expect(promoted).not.toHaveProperty("password");
    expect((await get(`/v1/databases/${promoted.id}`)).body.data).toEqual(promoted);
    expect((await get(`/v1/databases/${db}/replicas/${id}`)).status).toBe(404);
  });

  it("the new database's operations show its promotion (`promote`, a type the document lists)", async () => {
    const db = await newDatabase("promoting-ops");
    const id = await newReplica(db, "promoted-ops");
    const promoted = (await post(`/v1/databases/${db}/replicas/${id}/promote`)).body.data.id;
    const res = await get(`/v1/databases/${promoted}/operations`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.operations.map((op: { type: string }) => op.type)).toContain("promote");
  });

  it("409 for a replica that is not running, and for a name a database of the organization has", async () => {
    const db = await newDatabase("promote-refused");
    const seeding = await newReplica(db, "seeding", "provisioning");
    const res = await post(`/v1/databases/${db}/replicas/${seeding}/promote`);
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "resource_conflict", message: expect.stringContaining("provisioning") });

    const clash = await newReplica(db, "primary");
    expect((await post(`/v1/databases/${db}/replicas/${clash}/promote`)).status).toBe(409);
    expect(stubs.state.replicas.has(clash)).toBe(true);
  });

  it("402 when the organization may not run one more database (the service's allowance check); the replica stays", async () => {
    // The stub refuses a `large` database as beyond the allowance, as the real service does past the free
    // allowance without a default payment method in good standing (a past-due invoice).
    const db = await newDatabase("promote-unpaid");
    const res0 = await post(`/v1/databases/${db}/replicas`, { name: "large-one", tier: "large" });
    expect(res0.status, res0.text).toBe(201);
    const id = res0.body.data.id;
    setReplicaStatus(stubs.state, id, "running");
    const res = await post(`/v1/databases/${db}/replicas/${id}/promote`);
    expect(res.status, res.text).toBe(402);
    expect(res.body.error.code).toBe("payment_required");
    expect(stubs.state.replicas.has(id)).toBe(true);
  });

  it("403 without databases:write", async () => {
    const id = await newReplica(primary, "kept");
    const res = await post(`/v1/databases/${primary}/replicas/${id}/promote`, undefined, READER);
    expect(res.status).toBe(403);
    expect(stubs.state.replicas.has(id)).toBe(true);
  });
});
