/**
 * High availability through the gateway (docs/product.md, High availability): how the HA RPCs map onto the
 * public JSON and which refusals become which statuses — GET and PUT 200 with the record, POST …/failover 202
 * with the operation; 409 for a region without hosts to spare, a database not running and a switchover without
 * standbys; 402 without a payment method; 422 naming the field (PUT and create); 404 for another organization's
 * database; 403 without the permission. Every response is checked against the OpenAPI document by `api()`.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { T0 } from "./support/stub-state.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-ha";
const OTHER = "tok-ha-other-org";
const UNPAID = "tok-ha-no-payment-method";
const READER = "tok-ha-read-only";

const send = (method: string, path: string, body?: unknown, token = TOKEN) => api(gw.url, path, { method, token, body });
const get = (path: string, token = TOKEN) => api(gw.url, path, { token });
const seen = (rpc: string) => stubs.state.seen.get(rpc) ?? [];

async function newDatabase(name: string, status = "running", token = TOKEN): Promise<string> {
  const res = await send("POST", "/v1/databases", { name, region: "fsn1", tier: "micro" }, token);
  expect(res.status, res.text).toBe(201);
  stubs.state.databases.get(res.body.data.id)!.db.status = status;
  return res.body.data.id;
}

beforeAll(async () => {
  stubs = await startStubs();
  const tokens = stubs.state.tokens;
  tokens.set(TOKEN, principal({ org: "org-ha", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  tokens.set(OTHER, principal({ org: "org-ha-elsewhere", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  tokens.set(UNPAID, principal({ org: "org-ha-unpaid", permissions: ALL_PERMISSIONS }));
  tokens.set(READER, principal({ org: "org-ha", permissions: ["databases:read"], plan: "enterprise" }));
  gw = await startGateway(stubs);
  expect((await send("POST", "/v1/billing/payment-methods", { type: "card", token: "tok_visa" })).status).toBe(201);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("GET and PUT /v1/databases/{id}/high-availability", () => {
  it("GET: no standbys, the primary alone, last_failover null", async () => {
    const id = await newDatabase("ha-get");
    const res = await get(`/v1/databases/${id}/high-availability`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({
      standbys: 0,
      synchronous: false,
      members: [{ id: `node-${id.slice(3)}p`, role: "primary", status: "running", region: "fsn1", lag_bytes: 0 }],
      last_failover: null,
    });
  });

  it("PUT 200 with the record: the standbys as members; the body goes upstream as given", async () => {
    const id = await newDatabase("ha-put");
    const res = await send("PUT", `/v1/databases/${id}/high-availability`, { standbys: 2, synchronous: true });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.standbys).toBe(2);
    expect(res.body.data.synchronous).toBe(true);
    expect(res.body.data.members.map((m: { role: string }) => m.role)).toEqual(["primary", "standby", "standby"]);
    expect(res.body.data.members[1]).toEqual({
      id: `node-${id.slice(3)}s1`,
      role: "standby",
      status: "running",
      region: "fsn1",
      lag_bytes: 128,
    });
    expect(seen("setHighAvailability").at(-1)).toMatchObject({ organizationId: "org-ha", databaseId: id, standbys: 2, synchronous: true });
    expect((await get(`/v1/databases/${id}/high-availability`)).body.data.standbys).toBe(2);
  });

  it("422 naming the field: standbys outside 0-2 or missing, synchronous not a boolean, an unknown field (the gateway refuses; nothing goes upstream)", async () => {
    const id = await newDatabase("ha-422");
    const before = seen("setHighAvailability").length;
    for (const [body, field] of [
      [{ standbys: 3, synchronous: false }, "standbys"],
      [{ standbys: -1, synchronous: false }, "standbys"],
      [{ standbys: 1.5, synchronous: false }, "standbys"],
      [{ synchronous: false }, "standbys"],
      [{ standbys: 1, synchronous: "yes" }, "synchronous"],
      [{ standbys: 1, synchronous: true, zones: 2 }, "zones"],
    ] as const) {
      const res = await send("PUT", `/v1/databases/${id}/high-availability`, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    expect(seen("setHighAvailability").length).toBe(before);
    // What only the service knows: synchronous without a standby.
    const res = await send("PUT", `/v1/databases/${id}/high-availability`, { standbys: 0, synchronous: true });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: "synchronous", message: "needs at least 1 standby" }]);
  });

  it("409 naming the reason: the region lacks hosts, or the database is not running", async () => {
    const id = await newDatabase("one-host-db");
    const res = await send("PUT", `/v1/databases/${id}/high-availability`, { standbys: 2, synchronous: false });
    expect(res.status).toBe(409);
    expect(res.body.error.message).toMatch(/^region fsn1 has 0 hosts besides the primary's that can take a standby now/);
    const stopped = await newDatabase("ha-stopped", "stopped");
    const res2 = await send("PUT", `/v1/databases/${stopped}/high-availability`, { standbys: 1, synchronous: false });
    expect(res2.status).toBe(409);
    expect(res2.body.error.message).toBe("cannot add standbys to a database that is stopped");
  });

  it("402 without a payment method; 404 for another organization's database; 403 for a reader's PUT, 200 for its GET", async () => {
    const unpaid = await newDatabase("ha-unpaid", "running", UNPAID);
    const res = await send("PUT", `/v1/databases/${unpaid}/high-availability`, { standbys: 1, synchronous: false }, UNPAID);
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe("payment_required");
    const mine = await newDatabase("ha-mine");
    expect((await get(`/v1/databases/${mine}/high-availability`, OTHER)).status).toBe(404);
    expect((await send("PUT", `/v1/databases/${mine}/high-availability`, { standbys: 1, synchronous: false }, OTHER)).status).toBe(404);
    expect((await send("PUT", `/v1/databases/${mine}/high-availability`, { standbys: 1, synchronous: false }, READER)).status).toBe(403);
    expect((await get(`/v1/databases/${mine}/high-availability`, READER)).status).toBe(200);
  });
});

describe("POST /v1/databases/{id}/failover", () => {
  it("202 with the failover operation: its reason and both members", async () => {
    const id = await newDatabase("ha-switch");
    expect((await send("PUT", `/v1/databases/${id}/high-availability`, { standbys: 1, synchronous: true })).status).toBe(200);
    const res = await send("POST", `/v1/databases/${id}/failover`);
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toEqual({
      id: `op-${id.slice(3)}f`,
      type: "failover",
      status: "running",
      started_at: "2025-03-01T10:00:00.000Z",
      finished_at: null,
      error: null,
      reason: "planned switchover requested",
      from: `node-${id.slice(3)}p`,
      to: `node-${id.slice(3)}s1`,
    });
    // The operations list shows it the same way; other operations carry no failover fields.
    const ops = (await get(`/v1/databases/${id}/operations`)).body.data.operations;
    expect(ops.find((o: { type: string }) => o.type === "failover")).toEqual(res.body.data);
    expect(Object.keys(ops.find((o: { type: string }) => o.type === "create"))).not.toContain("reason");
  });

  it("409 without standbys or when not running; 404 for another organization's; 403 for a reader; a body is refused (422)", async () => {
    const id = await newDatabase("ha-no-standby");
    const res = await send("POST", `/v1/databases/${id}/failover`);
    expect(res.status).toBe(409);
    expect(res.body.error.message).toBe("the database has no standbys to fail over to; set standbys first (PUT …/high-availability)");
    expect((await send("POST", `/v1/databases/${id}/failover`, undefined, OTHER)).status).toBe(404);
    expect((await send("POST", `/v1/databases/${id}/failover`, undefined, READER)).status).toBe(403);
    expect((await send("POST", `/v1/databases/${id}/failover`, { to: "node-x" })).status).toBe(422);
  });
});

describe("GET /v1/databases/{id}/operations: a lost standby replaced", () => {
  it("standby_replaced carries its reason, the standby retired (from) and its replacement (to) once placed", async () => {
    const id = await newDatabase("ha-replaced");
    const op = (n: string, to: string, reason: string) => ({
      id: `op-${id.slice(3)}${n}`,
      databaseId: id,
      type: "standby_replaced",
      status: "succeeded",
      startedAt: timestampFromDate(T0),
      finishedAt: timestampFromDate(T0),
      reason,
      fromMember: `node-${id.slice(3)}s${n}`,
      toMember: to,
    });
    stubs.state.operations.set(id, [
      op("1", `node-${id.slice(3)}r1`, "the standby's host ha-b was not heard from …; its replacement … was placed on ha-c at …"),
      op("2", "", "the standby's host ha-c was not heard from …; no other host of region fsn1 can take a replacement now …"),
    ]);
    const ops = (await get(`/v1/databases/${id}/operations`)).body.data.operations;
    expect(ops.filter((o: { type: string }) => o.type === "standby_replaced")).toEqual([
      {
        id: `op-${id.slice(3)}1`,
        type: "standby_replaced",
        status: "succeeded",
        started_at: "2025-03-01T10:00:00.000Z",
        finished_at: "2025-03-01T10:00:00.000Z",
        error: null,
        reason: "the standby's host ha-b was not heard from …; its replacement … was placed on ha-c at …",
        from: `node-${id.slice(3)}s1`,
        to: `node-${id.slice(3)}r1`,
      },
      {
        id: `op-${id.slice(3)}2`,
        type: "standby_replaced",
        status: "succeeded",
        started_at: "2025-03-01T10:00:00.000Z",
        finished_at: "2025-03-01T10:00:00.000Z",
        error: null,
        reason: "the standby's host ha-c was not heard from …; no other host of region fsn1 can take a replacement now …",
        from: `node-${id.slice(3)}s2`,
      },
    ]);
  });
});

describe("POST /v1/databases with standbys", () => {
  it("passes standbys and synchronous upstream (default 0 and false); 422 beyond 2", async () => {
    expect(
      (await send("POST", "/v1/databases", { name: "ha-create", region: "fsn1", tier: "micro", standbys: 1, synchronous: true })).status,
    ).toBe(201);
    expect(seen("createDatabase").at(-1)).toMatchObject({ name: "ha-create", standbys: 1, synchronous: true });
    expect((await send("POST", "/v1/databases", { name: "ha-create-2", region: "fsn1", tier: "micro" })).status).toBe(201);
    expect(seen("createDatabase").at(-1)).toMatchObject({ name: "ha-create-2", standbys: 0, synchronous: false });
    const res = await send("POST", "/v1/databases", { name: "ha-create-3", region: "fsn1", tier: "micro", standbys: 5 });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(["standbys"]);
  });
});
