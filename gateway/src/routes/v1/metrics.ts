import { Type } from "@sinclair/typebox";
import { ok, type Reply } from "../../middleware/envelope.ts";
import { optional, query, text, timestamp } from "../../schema.ts";
import { timestampOf } from "../mappers.ts";
import { METRICS } from "../responses.ts";
import type { AuthedCall } from "../route.ts";

/** The largest step GetMetrics can carry (int32 seconds, some 68 years). */
export const STEP_MAX_SECONDS = 2_147_483_647;

/** docs/product.md, Metrics. The databases service checks the rest (the names, start after end, at most 1,000 points) and names the field. */
export const metricsQuery = query({
  start: optional(timestamp("Start of the range (ISO 8601); default: an hour before end.")),
  end: optional(timestamp("End of the range (ISO 8601); default: now.")),
  step: optional(
    Type.Integer({
      minimum: 60,
      // The service's step_seconds is an int32.
      maximum: STEP_MAX_SECONDS,
      description: "Seconds between points (at least 60, default 60); at most 1,000 points per series.",
    }),
  ),
  names: optional(text(1000, "Comma-separated metric names; default: every metric. An unknown name is refused, listing the known ones.")),
});

/** A database's metrics, one point per step bucket that has data (a bucket without samples has no point, never a null). */
export async function getMetrics(call: AuthedCall<unknown>): Promise<Reply> {
  const q = call.query as { start?: string; end?: string; step?: number; names?: string };
  const res = await call.ctx.databases.getMetrics({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    ...(q.start !== undefined && { start: timestampOf(q.start) }),
    ...(q.end !== undefined && { end: timestampOf(q.end) }),
    stepSeconds: q.step ?? 0,
    names: (q.names ?? "")
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n !== ""),
  });
  return ok(METRICS.map(res));
}
