import { create } from "@bufbuild/protobuf";
import { Validator } from "@dbaas/kit";
import { GetStandingResponseSchema, type GetStandingRequest, type GetStandingResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { hasPastDueInvoice } from "../db/invoices.ts";
import { hasDefaultPaymentMethod } from "../db/payment-methods.ts";
import { checkOrganizationId } from "../validation.ts";

/** Whether the organization may use what costs money beyond the free allowance (asked before such writes). */
export function getStanding(ctx: AppContext) {
  return async (req: GetStandingRequest): Promise<GetStandingResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();
    const [hasDefault, pastDue] = await Promise.all([
      hasDefaultPaymentMethod(ctx.pool, req.organizationId),
      hasPastDueInvoice(ctx.pool, req.organizationId),
    ]);
    return create(GetStandingResponseSchema, { hasDefaultPaymentMethod: hasDefault, hasPastDueInvoice: pastDue });
  };
}
