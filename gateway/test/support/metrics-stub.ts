import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { invalidArgument } from "@dbaas/kit";
import type { Database, DatabasesService } from "@dbaas/proto/databases";
import { record, type StubState } from "./stub-state.ts";

/** The names the databases service knows (docs/product.md, Metrics), as the stub refuses others. */
export const STUB_METRIC_NAMES = ["cpu_percent", "connections"] as const;

type Find = (org: string, id: string) => Promise<{ db: Database }>;

/**
 * GetMetrics as databases_service.proto states it: defaults (the last hour,
 * step 60), INVALID_ARGUMENT naming names/start, and one point per bucket —
 * here two fixed buckets from the start, so a test sees the mapping.
 */
export function metricsRoutes(state: StubState, find: Find): Pick<ServiceImpl<typeof DatabasesService>, "getMetrics"> {
  return {
    async getMetrics(req) {
      record(state, "getMetrics", req);
      await find(req.organizationId, req.databaseId);
      const end = req.end ? timestampDate(req.end) : new Date("2025-03-01T12:00:00Z");
      const start = req.start ? timestampDate(req.start) : new Date(end.getTime() - 3600_000);
      const unknown = req.names.filter((n) => !(STUB_METRIC_NAMES as readonly string[]).includes(n));
      if (unknown.length > 0)
        throw invalidArgument([{ field: "names", message: `unknown metric "${unknown[0]}"; known: ${STUB_METRIC_NAMES.join(", ")}` }]);
      if (start > end) throw invalidArgument([{ field: "start", message: "must not be after end" }]);
      const step = req.stepSeconds || 60;
      const first = BigInt(Math.floor(start.getTime() / 1000 / step) * step);
      const points = { unixSeconds: [first, first + BigInt(step)], values: [12.5, 0.25] };
      // As a databases service from before the packed columns sends them (a rolling deploy): the gateway reads both.
      const legacyPoints = [
        { unixSeconds: first, value: 12.5 },
        { unixSeconds: first + BigInt(step), value: 0.25 },
      ];
      const names = req.names.length > 0 ? req.names : [...STUB_METRIC_NAMES];
      return {
        start: timestampFromDate(start),
        end: timestampFromDate(end),
        stepSeconds: step,
        metrics: names.map((name) =>
          name === "connections"
            ? {
                name,
                unit: "connections",
                series: [{ labels: { state: "active" }, points: legacyPoints }, { labels: { state: "idle" } }],
              }
            : { name, unit: "percent", series: [{ labels: {}, ...points }] },
        ),
      };
    },
  };
}
