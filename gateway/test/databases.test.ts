import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-db";
const OTHER = "tok-db-other-org";
let dbId: string;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-db", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-other", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("POST /v1/databases", () => {
  it("201 with every field of the create response, password in clear", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "orders", region: "fsn1", tier: "micro" },
    });
    expect(res.status).toBe(201);
    dbId = res.body.data.id;
    expect(res.body.data).toEqual({
      id: dbId,
      name: "orders",
      type: "postgres",
      region: "fsn1",
      tier: "micro",
      version: "17",
      status: "provisioning",
      host: `${dbId}.db.example.test`,
      port: 5432,
      database: "defaultdb",
      username: "dbadmin",
      password: "s3cret-password-of-24-chars",
      connection_string: `postgresql://dbadmin:s3cret-password-of-24-chars@${dbId}.db.example.test:5432/defaultdb?sslmode=require`,
      created_at: "2025-03-01T10:00:00.000Z",
    });
  });

  it("passes the principal's organization, never one from the body", async () => {
    const before = stubs.state.seen.get("createDatabase")!.length;
    // A body naming an organization is refused (issue 10: unknown fields are 422), before any service is asked.
    const foreign = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "sneaky", region: "fsn1", tier: "micro", organization_id: "org-other", version: "16" },
    });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.details.map((d: { field: string }) => d.field)).toEqual(["organization_id"]);
    expect(stubs.state.seen.get("createDatabase")).toHaveLength(before);
    await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "sneaky", region: "fsn1", tier: "micro", version: "16" },
    });
    const seen = stubs.state.seen.get("createDatabase")!.at(-1) as any;
    expect(seen.organizationId).toBe("org-db");
    expect(seen.version).toBe("16");
  });
});

describe("GET /v1/databases/{id}", () => {
  it("returns the record with a masked connection string and no password", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}`, { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      id: dbId,
      name: "orders",
      type: "postgres",
      region: "fsn1",
      tier: "micro",
      version: "17",
      status: "provisioning",
      host: `${dbId}.db.example.test`,
      port: 5432,
      database: "defaultdb",
      username: "dbadmin",
      connection_string: `postgresql://dbadmin:********@${dbId}.db.example.test:5432/defaultdb?sslmode=require`,
      created_at: "2025-03-01T10:00:00.000Z",
      updated_at: "2025-03-01T10:00:00.000Z",
    });
    expect(res.text).not.toContain("s3cret");
  });

  it("shows status_reason only when there is one", async () => {
    stubs.state.databases.get(dbId)!.db.statusReason = "disk full";
    const res = await api(gw.url, `/v1/databases/${dbId}`, { token: TOKEN });
    expect(res.body.data.status_reason).toBe("disk full");
    stubs.state.databases.get(dbId)!.db.statusReason = "";
  });

  it("another organization's database is 404", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}`, { token: OTHER });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("resource_not_found");
  });
});

describe("GET /v1/databases", () => {
  beforeAll(async () => {
    for (const name of ["alpha", "beta", "gamma"]) {
      await api(gw.url, "/v1/databases", { method: "POST", token: TOKEN, body: { name, region: "hel1", tier: "small" } });
    }
  });

  it("list items carry only the list fields, with page meta", async () => {
    const res = await api(gw.url, "/v1/databases?per_page=2", { token: TOKEN });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(["data", "meta"]);
    expect(res.body.meta).toEqual({ request_id: expect.any(String), page: 1, per_page: 2, total: 5, total_pages: 3 });
    expect(res.body.data.databases).toHaveLength(2);
    for (const item of res.body.data.databases) {
      expect(Object.keys(item).sort()).toEqual(["created_at", "id", "name", "region", "status", "tier", "version"]);
      expect(item.created_at).toMatch(ISO);
    }
  });

  it("defaults to page 1 of 20 and passes filters", async () => {
    const res = await api(gw.url, "/v1/databases?region=hel1&status=provisioning", { token: TOKEN });
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 3, total_pages: 1 });
    const seen = stubs.state.seen.get("listDatabases")!.at(-1) as any;
    expect(seen).toMatchObject({ organizationId: "org-db", page: 1, perPage: 20, region: "hel1", status: "provisioning" });
  });

  it("an empty list has zero pages", async () => {
    const res = await api(gw.url, "/v1/databases", { token: OTHER });
    expect(res.body).toMatchObject({ data: { databases: [] }, meta: { total: 0, total_pages: 0 } });
  });

  it.each([["page=abc"], ["per_page=2.5"], ["page=1e3"], ["per_page="], ["page=1&page=2"]])("a non-integer %s is 400", async (query) => {
    const res = await api(gw.url, `/v1/databases?${query}`, { token: TOKEN });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("validation_error");
    expect(res.body.error.details[0].field).toMatch(/^(page|per_page)$/);
  });

  it.each([
    ["per_page=101", "per_page"],
    ["per_page=0", "per_page"],
    ["page=0", "page"],
    ["page=-1", "page"],
  ])("out of range %s is 422", async (query, field) => {
    const res = await api(gw.url, `/v1/databases?${query}`, { token: TOKEN });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field, message: expect.any(String) }]);
  });

  it("per_page=100 and a page past the end are fine", async () => {
    const res = await api(gw.url, "/v1/databases?per_page=100&page=7", { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.body.data.databases).toEqual([]);
    expect(res.body.meta).toMatchObject({ page: 7, per_page: 100, total: 5, total_pages: 1 });
  });
});

describe("changing a database", () => {
  it("PATCH renames and returns the full record", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}`, { method: "PATCH", token: TOKEN, body: { name: "orders-2" } });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: dbId, name: "orders-2", type: "postgres" });
    expect(res.body.data.password).toBeUndefined();
  });

  it("PATCH with a wrong type is 422", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}`, { method: "PATCH", token: TOKEN, body: { name: null } });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "name", message: "must be a string" }]);
  });

  // The stub applies the service's lifecycle table (409 from any other status): each starts where it may.
  const statusAs = (status: string) => {
    stubs.state.databases.get(dbId)!.db.status = status;
  };

  it.each([
    ["start", "starting", "stopped"],
    ["stop", "stopping", "running"],
    ["restart", "restarting", "running"],
  ])("POST /%s → {id, status}", async (action, status, from) => {
    statusAs(from);
    const res = await api(gw.url, `/v1/databases/${dbId}/${action}`, { method: "POST", token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: dbId, status });
  });

  it("POST /resize → {id, tier, status}", async () => {
    statusAs("running");
    const res = await api(gw.url, `/v1/databases/${dbId}/resize`, { method: "POST", token: TOKEN, body: { tier: "small" } });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: dbId, tier: "small", status: "resizing" });
  });

  it("POST /resize without a tier is 422", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}/resize`, { method: "POST", token: TOKEN, body: {} });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "tier", message: "is required" }]);
  });

  it("POST /reset-password → {password, connection_string}", async () => {
    statusAs("running");
    const res = await api(gw.url, `/v1/databases/${dbId}/reset-password`, { method: "POST", token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      password: "a-brand-new-password-24ch",
      connection_string: expect.stringContaining(":a-brand-new-password-24ch@"),
    });
  });

  it("an action on another organization's database is 404", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}/stop`, { method: "POST", token: OTHER });
    expect(res.status).toBe(404);
  });
});

describe("operations and certificate", () => {
  it("lists operations with ISO timestamps and nulls for what has not happened", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}/operations?per_page=10`, { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.body.data.operations).toEqual([
      {
        id: "op-1",
        type: "create",
        status: "succeeded",
        started_at: "2025-03-01T10:00:00.000Z",
        finished_at: "2025-03-01T10:00:30.000Z",
        error: null,
      },
      { id: "op-2", type: "stop", status: "running", started_at: "2025-03-01T10:00:00.000Z", finished_at: null, error: null },
    ]);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 10, total: 2, total_pages: 1 });
    expect(stubs.state.seen.get("listOperations")!.at(-1)).toMatchObject({ databaseId: dbId, perPage: 10 });
  });

  it("serves the CA certificate as a PEM file", async () => {
    const res = await api(gw.url, `/v1/databases/${dbId}/ca-certificate`, { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/x-pem-file/);
    expect(res.text).toMatch(/^-----BEGIN CERTIFICATE-----\n/);
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  it("the certificate of an unknown database is a JSON 404", async () => {
    const res = await api(gw.url, "/v1/databases/db-nope/ca-certificate", { token: TOKEN });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("resource_not_found");
  });
});

describe("catalogue", () => {
  it("tiers in snake_case", async () => {
    const res = await api(gw.url, "/v1/tiers", { token: TOKEN });
    expect(res.body.data).toEqual({
      tiers: [{ name: "micro", vcpu: 1, memory_gb: 1, storage_gb: 10, hourly_price: 0.02 }],
    });
  });

  it("versions with their default", async () => {
    const res = await api(gw.url, "/v1/versions", { token: TOKEN });
    expect(res.body.data).toEqual({
      versions: [
        { version: "16", default: false },
        { version: "17", default: true },
      ],
    });
  });
});

describe("DELETE /v1/databases/{id}", () => {
  it("204, then the database is gone", async () => {
    expect((await api(gw.url, `/v1/databases/${dbId}`, { method: "DELETE", token: TOKEN })).status).toBe(204);
    expect((await api(gw.url, `/v1/databases/${dbId}`, { token: TOKEN })).status).toBe(404);
  });
});
