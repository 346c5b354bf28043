import type { GetMetricsRequest, GetMetricsResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { queryMetrics } from "../metrics/query.ts";

/**
 * A live database's metrics over a time range (docs/product.md, Metrics); INVALID_ARGUMENT names the field at fault.
 * The points go out as the packed columns, never as MetricPoint messages: a week at a 605 s step is 18,000
 * points, and encoding one message each took more of the RPC's time than the query (docs/benchmarks.md, Metrics).
 */
export function getMetrics(ctx: AppContext) {
  return async (req: GetMetricsRequest): Promise<GetMetricsResponse> => packed(await queryMetrics(ctx, req));
}

/** Moves every series' points into its unix_seconds and values columns (the response is ours to change). */
function packed(res: GetMetricsResponse): GetMetricsResponse {
  for (const metric of res.metrics) {
    for (const s of metric.series) {
      s.unixSeconds = s.points.map((p) => p.unixSeconds);
      s.values = s.points.map((p) => p.value);
      s.points = [];
    }
  }
  return res;
}
