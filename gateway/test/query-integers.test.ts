/**
 * Integer query parameters (docs/product.md, Databases: "`per_page` > 100 or < 1,
 * `page` < 1 → 422"): an integer out of range is a well-formed request that
 * failed validation, 422 naming the bounds, however many digits it has; only
 * what is not an integer at all is malformed, 400. Neither reaches a service.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { STEP_MAX_SECONDS } from "../src/routes/v1/metrics.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-query-integers";
let database: string;

const get = (path: string) => api(gw.url, path, { token: TOKEN });
const seen = (rpc: string) => stubs.state.seen.get(rpc)?.length ?? 0;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-query-integers", permissions: ALL_PERMISSIONS, plan: "internal" }));
  gw = await startGateway(stubs);
  const res = await api(gw.url, "/v1/databases", { method: "POST", token: TOKEN, body: { name: "orders", region: "fsn1", tier: "micro" } });
  expect(res.status, res.text).toBe(201);
  database = res.body.data.id;
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

let listsBefore = 0;
beforeEach(() => {
  listsBefore = seen("listDatabases");
});

describe("page and per_page", () => {
  it.each([
    ["per_page", "1000000000", "must be between 1 and 100"],
    ["per_page", "99999999999999999999", "must be between 1 and 100"],
    ["per_page", "-1000000000", "must be between 1 and 100"],
    ["page", "1000000000", "must be between 1 and 999999999"],
    ["page", "-99999999999999999999", "must be between 1 and 999999999"],
  ])("%s=%s is 422 naming the bounds, not 'must be an integer'", async (name, value, message) => {
    const res = await get(`/v1/databases?${name}=${value}`);
    expect(res.status, res.text).toBe(422);
    expect(res.body.error).toMatchObject({ code: "validation_error", details: [{ field: name, message }] });
    expect(seen("listDatabases")).toBe(listsBefore);
  });

  it("leading zeros do not count as digits: per_page=0000000000000000000100 is 100", async () => {
    const res = await get("/v1/databases?per_page=0000000000000000000100");
    expect(res.status, res.text).toBe(200);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 100 });
  });

  it.each(["1.5", "1e3", "+1", "0x10", " 1", "", "١"])("per_page=%j is not an integer: 400", async (value) => {
    const res = await get(`/v1/databases?per_page=${encodeURIComponent(value)}`);
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.details).toEqual([{ field: "per_page", message: "must be an integer" }]);
    expect(seen("listDatabases")).toBe(listsBefore);
  });
});

describe("the metrics step", () => {
  it("a step beyond the service's int32 is 422 naming the bounds; the largest passes", async () => {
    for (const step of [String(STEP_MAX_SECONDS + 1), "9999999999"]) {
      const res = await get(`/v1/databases/${database}/metrics?step=${step}`);
      expect(res.status, res.text).toBe(422);
      expect(res.body.error.details).toEqual([{ field: "step", message: `must be between 60 and ${STEP_MAX_SECONDS}` }]);
    }
    const before = seen("getMetrics");
    const res = await get(`/v1/databases/${database}/metrics?step=${STEP_MAX_SECONDS}`);
    expect(res.status, res.text).toBe(200);
    expect(seen("getMetrics")).toBe(before + 1);
  });
});
