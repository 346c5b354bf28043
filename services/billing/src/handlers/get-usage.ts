import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { CURRENCY, Validator } from "@dbaas/kit";
import { GetUsageResponseSchema, type GetUsageRequest, type GetUsageResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { listStatusChangesForPeriod } from "../db/status-events.ts";
import { monthOf, priceCompute, runningIntervals, type PricedLine } from "../usage.ts";
import { checkOrganizationId } from "../validation.ts";

// Nothing feeds these meters yet: storage GB-months and transfer GB will come
// from the provisioner agents' storage and data-transfer samples, replica hours
// from replica status changes once databases have replicas. Until then they are
// reported as zero rather than left out, so the report's shape is stable.
const NOT_METERED_YET: PricedLine = { quantity: 0, amount: 0 };

/** Month-to-date usage of one organization, for the calendar month (UTC) of the injected clock's "now". */
export function getUsage(ctx: AppContext) {
  return async (req: GetUsageRequest): Promise<GetUsageResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();

    const now = ctx.clock.now();
    const period = monthOf(now);
    const changes = await listStatusChangesForPeriod(ctx.pool, req.organizationId, period.start, now);
    const compute = priceCompute(runningIntervals(changes, period.start, now));
    const storage = NOT_METERED_YET;
    const transfer = NOT_METERED_YET;
    const replicas = NOT_METERED_YET;
    // Every amount is a whole number of 1e-4 USD; summing those units avoids float drift.
    const totalUnits = [compute, storage, transfer, replicas].reduce((sum, l) => sum + Math.round(l.amount * 10_000), 0);

    return create(GetUsageResponseSchema, {
      periodStart: timestampFromDate(period.start),
      periodEnd: timestampFromDate(period.end),
      computeHours: compute,
      storageGb: storage,
      dataTransferGb: transfer,
      replicaHours: replicas,
      total: totalUnits / 10_000,
      currency: CURRENCY,
    });
  };
}
