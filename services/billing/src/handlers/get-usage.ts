import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Validator } from "@dbaas/kit";
import { CURRENCY } from "@dbaas/catalogue";
import { GetUsageResponseSchema, type GetUsageRequest, type GetUsageResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { readMonthToDate } from "../usage.ts";
import { checkOrganizationId } from "../validation.ts";

/** Month-to-date usage of one organization, for the calendar month (UTC) of the injected clock's "now". */
export function getUsage(ctx: AppContext) {
  return async (req: GetUsageRequest): Promise<GetUsageResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();

    const usage = await readMonthToDate(ctx.pool, req.organizationId, ctx.clock.now());
    return create(GetUsageResponseSchema, {
      periodStart: timestampFromDate(usage.period.start),
      periodEnd: timestampFromDate(usage.period.end),
      computeHours: usage.compute,
      storageGb: usage.storage,
      dataTransferGb: usage.dataTransfer,
      replicaHours: usage.replicas,
      total: usage.total,
      currency: CURRENCY,
    });
  };
}
