import type { Aggregate } from "../db/samples.ts";

/**
 * The metrics of docs/product.md, Metrics: each name's unit and series (label
 * sets), and how a bucket's value is computed from its aggregate. Gauges are
 * the average of the bucket's samples; counters are rates over the valid
 * intervals that ended in the bucket. A series has no point for a bucket
 * whose value is undefined (no sample, no valid interval, nothing to divide).
 */
interface SeriesDef {
  labels: Record<string, string>;
  value(a: Aggregate): number | undefined;
}

export interface MetricDef {
  name: string;
  unit: string;
  series: SeriesDef[];
  /** Not from the database's own samples: one series per replica (label `replica`), the lags its samples reported. */
  perReplica?: true;
}

const avg = (sum: (a: Aggregate) => number) => (a: Aggregate) => (a.samples > 0 ? sum(a) / a.samples : undefined);
const perStatSecond = (n: (a: Aggregate) => number) => (a: Aggregate) => (a.stat_seconds > 0 ? n(a) / a.stat_seconds : undefined);
const perNetworkSecond = (n: (a: Aggregate) => number) => (a: Aggregate) => (a.network_seconds > 0 ? n(a) / a.network_seconds : undefined);
const gauge = (name: string, unit: string, sum: (a: Aggregate) => number): MetricDef => ({
  name,
  unit,
  series: [{ labels: {}, value: avg(sum) }],
});

export const METRICS: readonly MetricDef[] = [
  gauge("cpu_percent", "percent", (a) => a.cpu_percent_sum),
  gauge("memory_bytes", "bytes", (a) => a.memory_bytes_sum),
  gauge("storage_bytes", "bytes", (a) => a.storage_bytes_sum),
  {
    name: "connections",
    unit: "connections",
    series: [
      { labels: { state: "active" }, value: avg((a) => a.connections_active_sum) },
      { labels: { state: "idle" }, value: avg((a) => a.connections_idle_sum) },
      { labels: { state: "idle_in_transaction" }, value: avg((a) => a.connections_idle_in_transaction_sum) },
    ],
  },
  { name: "transactions_per_second", unit: "transactions/s", series: [{ labels: {}, value: perStatSecond((a) => a.xacts) }] },
  {
    name: "rows_per_second",
    unit: "rows/s",
    series: [
      { labels: { op: "fetched" }, value: perStatSecond((a) => a.tup_fetched) },
      { labels: { op: "inserted" }, value: perStatSecond((a) => a.tup_inserted) },
      { labels: { op: "updated" }, value: perStatSecond((a) => a.tup_updated) },
      { labels: { op: "deleted" }, value: perStatSecond((a) => a.tup_deleted) },
    ],
  },
  {
    name: "cache_hit_ratio",
    unit: "ratio",
    // No block was asked for in the bucket: there is no ratio, not a ratio of 0 or 1.
    series: [
      {
        labels: {},
        value: (a) => (a.stat_seconds > 0 && a.blks_hit + a.blks_read > 0 ? a.blks_hit / (a.blks_hit + a.blks_read) : undefined),
      },
    ],
  },
  { name: "deadlocks", unit: "deadlocks", series: [{ labels: {}, value: (a) => (a.stat_seconds > 0 ? a.deadlocks : undefined) }] },
  {
    name: "network_bytes_per_second",
    unit: "bytes/s",
    series: [
      { labels: { direction: "in" }, value: perNetworkSecond((a) => a.network_bytes_in) },
      { labels: { direction: "out" }, value: perNetworkSecond((a) => a.network_bytes_out) },
    ],
  },
  { name: "replication_lag_bytes", unit: "bytes", series: [], perReplica: true },
  gauge("wal_archive_lag_seconds", "seconds", (a) => a.wal_archive_lag_seconds_sum),
];

export const METRIC_NAMES: readonly string[] = METRICS.map((m) => m.name);
