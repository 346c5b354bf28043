import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { notFound, Validator } from "@dbaas/kit";
import { GetMetricsResponseSchema, type GetMetricsRequest, type GetMetricsResponse } from "@dbaas/proto/databases";
import type pg from "pg";
import type { AppContext } from "../context.ts";
import { ownsLive } from "../db/databases.ts";
import { lagAggregates } from "../db/replicas.ts";
import { type Aggregate, minuteAggregates, rollupAggregates } from "../db/samples.ts";
import { METRIC_NAMES, METRICS } from "./catalogue.ts";

/** Points per series at most (docs/product.md, Metrics). */
export const MAX_POINTS = 1000;
export const MIN_STEP_SECONDS = 60;
export const DEFAULT_RANGE_MS = 3600_000;
/** Raw samples are kept this long; older buckets come from the hourly roll-ups. */
export const SAMPLES_RETENTION_MS = 7 * 24 * 3600_000;
export const ROLLUPS_RETENTION_MS = 30 * 24 * 3600_000;

export interface Plan {
  start: Date;
  end: Date;
  step: number;
  names: string[];
}

/** The request with its defaults applied, or INVALID_ARGUMENT naming each field at fault. */
function plan(req: GetMetricsRequest, now: Date): Plan {
  const v = new Validator();
  const step = req.stepSeconds === 0 ? MIN_STEP_SECONDS : req.stepSeconds;
  if (step < MIN_STEP_SECONDS) v.add("step", `must be at least ${MIN_STEP_SECONDS} seconds`);
  const end = req.end ? timestampDate(req.end) : now;
  const start = req.start ? timestampDate(req.start) : new Date(end.getTime() - DEFAULT_RANGE_MS);
  if (start > end) v.add("start", "must not be after end");
  const unknown = req.names.filter((n) => !METRIC_NAMES.includes(n));
  if (unknown.length > 0) v.add("names", `unknown metric ${unknown.map((n) => `"${n}"`).join(", ")}; known: ${METRIC_NAMES.join(", ")}`);
  if (step >= MIN_STEP_SECONDS && start <= end) {
    const points = bucketOf(end, step) / step - bucketOf(start, step) / step + 1;
    if (points > MAX_POINTS) {
      v.add(
        "step",
        `start to end at a step of ${step} s makes ${points} points per series; at most ${MAX_POINTS} (a larger step or a shorter range)`,
      );
    }
  }
  v.throwIfAny();
  return { start, end, step, names: req.names.length > 0 ? [...new Set(req.names)] : [...METRIC_NAMES] };
}

/** Unix seconds of the start of the `step`-second bucket holding `t` (buckets are aligned to the Unix epoch). */
const bucketOf = (t: Date, step: number) => Math.floor(t.getTime() / 1000 / step) * step;

/**
 * The organization's live database's metrics over [start, end] (the request
 * checked against the limits of docs/product.md, Metrics, first).
 */
export async function queryMetrics(ctx: AppContext, req: GetMetricsRequest): Promise<GetMetricsResponse> {
  const now = ctx.clock.now();
  const p = plan(req, now);
  if (!(await ownsLive(ctx.pool, req.organizationId, req.databaseId))) throw notFound("database");
  return await metricsOf(ctx.pool, req.databaseId, p, now);
}

/**
 * A database's metrics as planned, whatever the number of points: one point
 * per `step`-second bucket that has data, at the bucket's start. Buckets older
 * than the raw samples' retention come from the hourly roll-ups, the others
 * from the per-minute aggregates. A per-replica metric has a series for each
 * replica with a point in the range (lags are kept as long as raw samples).
 */
export async function metricsOf(pool: pg.Pool, databaseId: string, p: Plan, now: Date): Promise<GetMetricsResponse> {
  const first = bucketOf(p.start, p.step);
  const afterLast = bucketOf(p.end, p.step) + p.step;
  // The first bucket boundary at or after the raw samples' horizon: buckets before it are rolled up.
  const split = Math.max(first, Math.min(afterLast, Math.ceil((now.getTime() - SAMPLES_RETENTION_MS) / 1000 / p.step) * p.step));
  const at = (s: number) => new Date(s * 1000);
  const lagsWanted = p.names.some((n) => METRICS.find((m) => m.name === n)!.perReplica);
  const [rolled, recent, lags] = await Promise.all([
    split > first ? rollupAggregates(pool, databaseId, at(first), at(split), p.step) : [],
    afterLast > split ? minuteAggregates(pool, databaseId, at(split), at(afterLast), p.step) : [],
    lagsWanted ? lagAggregates(pool, databaseId, at(first), at(afterLast), p.step) : [],
  ]);
  const lagSeries = new Map<string, { unixSeconds: bigint; value: number }[]>();
  for (const l of lags) {
    const points = lagSeries.get(l.replica_id) ?? [];
    points.push({ unixSeconds: BigInt(l.bucket), value: l.lag_bytes });
    lagSeries.set(l.replica_id, points);
  }
  const buckets: Aggregate[] = [...rolled, ...recent];
  return create(GetMetricsResponseSchema, {
    start: timestampFromDate(p.start),
    end: timestampFromDate(p.end),
    stepSeconds: p.step,
    metrics: p.names.map((name) => {
      const def = METRICS.find((m) => m.name === name)!;
      if (def.perReplica) {
        return { name, unit: def.unit, series: [...lagSeries].map(([replica, points]) => ({ labels: { replica }, points })) };
      }
      return {
        name,
        unit: def.unit,
        series: def.series.map((s) => ({
          labels: s.labels,
          points: buckets.flatMap((b) => {
            const value = s.value(b);
            return value === undefined ? [] : [{ unixSeconds: BigInt(b.bucket), value }];
          }),
        })),
      };
    }),
  });
}
