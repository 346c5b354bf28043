import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { CURRENCY, Validator } from "@dbaas/kit";
import { GetUsageResponseSchema, type GetUsageRequest, type GetUsageResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { monthOf, priceCompute, readUsage } from "../usage.ts";
import { checkOrganizationId } from "../validation.ts";

/** Month-to-date usage of one organization, for the calendar month (UTC) of the injected clock's "now". */
export function getUsage(ctx: AppContext) {
  return async (req: GetUsageRequest): Promise<GetUsageResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();

    const now = ctx.clock.now();
    const period = monthOf(now);
    const usage = await readUsage(ctx.pool, req.organizationId, period.start, now);
    const compute = priceCompute(usage.running);
    const { storage, dataTransfer, replicas } = usage;
    // Every amount is a whole number of 1e-4 USD; summing those units avoids float drift.
    const totalUnits = [compute, storage, dataTransfer, replicas].reduce((sum, l) => sum + Math.round(l.amount * 10_000), 0);

    return create(GetUsageResponseSchema, {
      periodStart: timestampFromDate(period.start),
      periodEnd: timestampFromDate(period.end),
      computeHours: compute,
      storageGb: storage,
      dataTransferGb: dataTransfer,
      replicaHours: replicas,
      total: totalUnits / 10_000,
      currency: CURRENCY,
    });
  };
}
