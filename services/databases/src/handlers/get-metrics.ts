import type { GetMetricsRequest, GetMetricsResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { queryMetrics } from "../metrics/query.ts";

/** A live database's metrics over a time range (DESIGN.md, Metrics); INVALID_ARGUMENT names the field at fault. */
export function getMetrics(ctx: AppContext) {
  return (req: GetMetricsRequest): Promise<GetMetricsResponse> => queryMetrics(ctx, req);
}
