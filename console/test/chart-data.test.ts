import type { Schemas } from "@dbaas/client";
import { describe, expect, it } from "vitest";
import { metricChart, RANGES, rangeQuery, usageBars } from "../src/chart-data.ts";

describe("metricChart", () => {
  it("aligns the series on the union of their timestamps, a missing point as null (a gap, not a made-up value)", () => {
    const metric: Schemas["Metric"] = {
      name: "connections",
      unit: "count",
      series: [
        {
          labels: { state: "active" },
          points: [
            [120, 3],
            [60, 1],
          ],
        },
        {
          labels: { state: "idle" },
          points: [
            [60, 5],
            [180, 7],
          ],
        },
      ],
    };
    expect(metricChart(metric)).toEqual({
      x: [60, 120, 180],
      series: [
        { label: "state=active", values: [1, 3, null] },
        { label: "state=idle", values: [5, null, 7] },
      ],
    });
  });

  it("names a series without labels after its metric, and has no x for no points", () => {
    expect(metricChart({ name: "storage_bytes", unit: "bytes", series: [{ labels: {}, points: [] }] })).toEqual({
      x: [],
      series: [{ label: "storage_bytes", values: [] }],
    });
  });
});

describe("rangeQuery", () => {
  it.each(RANGES.map((r) => [r.id]))("%s stays within the API's 1,000 points per series and its 60 s minimum step", (id) => {
    const now = new Date("2026-11-28T12:00:00Z");
    const q = rangeQuery(id, now);
    expect(q.end).toBe(now.toISOString());
    const seconds = (Date.parse(q.end) - Date.parse(q.start)) / 1000;
    expect(q.step).toBeGreaterThanOrEqual(60);
    expect(seconds / q.step).toBeLessThanOrEqual(1000);
  });
});

describe("usageBars", () => {
  it("one bar per kind of the bill, with its quantity and amount", () => {
    const usage: Schemas["Usage"] = {
      period: { start: "2026-11-01T00:00:00Z", end: "2026-12-01T00:00:00Z" },
      usage: {
        compute: { hours: 10, amount: 1.5 },
        storage: { gb: 2, amount: 0.2 },
        data_transfer: { gb: 3, amount: 0.3 },
        replicas: { hours: 0, amount: 0 },
      },
      total: 2,
      currency: "USD",
    };
    expect(usageBars(usage)).toEqual([
      { label: "Compute", quantity: "10 h", amount: 1.5 },
      { label: "Storage", quantity: "2 GB-month", amount: 0.2 },
      { label: "Data transfer", quantity: "3 GB", amount: 0.3 },
      { label: "Replicas", quantity: "0 h", amount: 0 },
    ]);
  });
});
