/**
 * GET /v1/databases/{id}/metrics through the gateway (docs/product.md, Metrics): the
 * query's mapping onto GetMetrics, the body's shape (checked against the
 * OpenAPI document by `api()`), and which refusals become which 422s.
 */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { GetMetricsRequest } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-metrics";
const OTHER = "tok-metrics-other-org";
let id: string;

const get = (path: string, token = TOKEN) => api(gw.url, path, { token });
const lastRequest = () => (stubs.state.seen.get("getMetrics") ?? []).at(-1) as GetMetricsRequest;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-metrics", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-elsewhere", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  gw = await startGateway(stubs);
  const res = await api(gw.url, "/v1/databases", {
    method: "POST",
    token: TOKEN,
    body: { name: "measured", region: "fsn1", tier: "micro" },
  });
  expect(res.status).toBe(201);
  id = res.body.data.id;
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("GET /v1/databases/{id}/metrics", () => {
  it("without parameters: the service's defaults, every name; points as [unix_seconds, value]", async () => {
    const res = await get(`/v1/databases/${id}/metrics`);
    expect(res.status).toBe(200);
    expect(lastRequest()).toMatchObject({ organizationId: "org-metrics", databaseId: id, stepSeconds: 0, names: [] });
    expect(lastRequest().start).toBeUndefined();
    expect(res.body.data).toEqual({
      start: "2025-03-01T11:00:00.000Z",
      end: "2025-03-01T12:00:00.000Z",
      step: 60,
      metrics: [
        {
          name: "cpu_percent",
          unit: "percent",
          series: [
            {
              labels: {},
              points: [
                [1740826800, 12.5],
                [1740826860, 0.25],
              ],
            },
          ],
        },
        {
          name: "connections",
          unit: "connections",
          series: [
            {
              labels: { state: "active" },
              points: [
                [1740826800, 12.5],
                [1740826860, 0.25],
              ],
            },
            { labels: { state: "idle" }, points: [] },
          ],
        },
      ],
    });
  });

  it("passes start, end, step and the comma-separated names", async () => {
    const res = await get(
      `/v1/databases/${id}/metrics?start=2025-03-01T00:00:00Z&end=2025-03-02T00:00:00.5Z&step=3600&names=connections,%20cpu_percent`,
    );
    expect(res.status).toBe(200);
    const req = lastRequest();
    expect(timestampDate(req.start!).toISOString()).toBe("2025-03-01T00:00:00.000Z");
    expect(timestampDate(req.end!).toISOString()).toBe("2025-03-02T00:00:00.500Z");
    expect(req.stepSeconds).toBe(3600);
    expect(req.names).toEqual(["connections", "cpu_percent"]);
    expect(res.body.data.step).toBe(3600);
    expect(res.body.data.metrics.map((m: { name: string }) => m.name)).toEqual(["connections", "cpu_percent"]);
  });

  it("422 naming the field: a step under 60, a malformed time, an unknown name, start after end", async () => {
    const fields = async (query: string) => {
      const res = await get(`/v1/databases/${id}/metrics?${query}`);
      expect(res.status, query).toBe(422);
      expect(res.body.error.code).toBe("validation_error");
      return res.body.error.details as { field: string; message: string }[];
    };
    expect((await fields("step=30"))[0]!.field).toBe("step");
    expect((await fields("start=yesterday"))[0]!.field).toBe("start");
    const [unknown] = await fields("names=cpu_percent,disk_iops");
    expect(unknown).toEqual({ field: "names", message: 'unknown metric "disk_iops"; known: cpu_percent, connections' });
    expect((await fields("start=2025-03-02T00:00:00Z&end=2025-03-01T00:00:00Z"))[0]!.field).toBe("start");
    expect((await get(`/v1/databases/${id}/metrics?step=sixty`)).status).toBe(400);
  });

  it("404 for another organization's database", async () => {
    const res = await get(`/v1/databases/${id}/metrics`, OTHER);
    expect(res.status).toBe(404);
  });
});
