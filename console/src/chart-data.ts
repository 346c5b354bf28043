import type { Schemas } from "@dbaas/client";

/** What a chart draws: x in Unix seconds, one y array per series (null where a series has no point), with their labels. */
export interface ChartData {
  x: number[];
  series: Array<{ label: string; values: Array<number | null> }>;
}

/** A series' name: its labels (`{state: "active"}` → `state=active`), or the metric's own name when it has none. */
function labelOf(metric: string, labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  return parts.length > 0 ? parts.join(", ") : metric;
}

/**
 * One metric of a metrics answer as chart data: the series' points aligned
 * on the union of their timestamps (a series without a point there gets null,
 * drawn as a gap rather than a made-up value).
 */
export function metricChart(metric: Schemas["Metric"]): ChartData {
  const xs = [...new Set(metric.series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const series = metric.series.map((s) => {
    const values: Array<number | null> = xs.map(() => null);
    for (const [t, v] of s.points) values[index.get(t)!] = v;
    return { label: labelOf(metric.name, s.labels), values };
  });
  return { x: xs, series };
}

/** The ranges a metrics chart offers, each with a step that keeps it under the API's 1,000 points per series. */
export const RANGES = [
  { id: "1h", label: "Last hour", seconds: 3600, step: 60 },
  { id: "6h", label: "Last 6 hours", seconds: 6 * 3600, step: 60 },
  { id: "24h", label: "Last 24 hours", seconds: 24 * 3600, step: 300 },
  { id: "7d", label: "Last 7 days", seconds: 7 * 24 * 3600, step: 3600 },
] as const;

export type RangeId = (typeof RANGES)[number]["id"];

/** The metrics query of a range ending at `now`. */
export function rangeQuery(id: RangeId, now: Date): { start: string; end: string; step: number } {
  const range = RANGES.find((r) => r.id === id)!;
  return { start: new Date(now.getTime() - range.seconds * 1000).toISOString(), end: now.toISOString(), step: range.step };
}

/** The month's usage as bars: one per line of the bill, its amount. */
export function usageBars(usage: Schemas["Usage"]): Array<{ label: string; quantity: string; amount: number }> {
  const u = usage.usage;
  return [
    { label: "Compute", quantity: `${u.compute.hours} h`, amount: u.compute.amount },
    { label: "Storage", quantity: `${u.storage.gb} GB-month`, amount: u.storage.amount },
    { label: "Data transfer", quantity: `${u.data_transfer.gb} GB`, amount: u.data_transfer.amount },
    { label: "Replicas", quantity: `${u.replicas.hours} h`, amount: u.replicas.amount },
  ];
}
