import type { UsageLine } from "@dbaas/proto/billing";
import { ok, type Reply } from "../../middleware/envelope.ts";
import { iso } from "../mappers.ts";
import type { AuthedCall } from "../route.ts";

const line = (l: UsageLine | undefined) => ({ quantity: l?.quantity ?? 0, amount: l?.amount ?? 0 });

/** Month-to-date usage of the caller's organization (spec 2.4). */
export async function getUsage({ ctx, principal }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.billing.getUsage({ organizationId: principal.organizationId });
  const compute = line(res.computeHours);
  const storage = line(res.storageGb);
  const transfer = line(res.dataTransferGb);
  const replicas = line(res.replicaHours);
  return ok({
    period: { start: iso(res.periodStart), end: iso(res.periodEnd) },
    usage: {
      compute: { hours: compute.quantity, amount: compute.amount },
      storage: { gb: storage.quantity, amount: storage.amount },
      data_transfer: { gb: transfer.quantity, amount: transfer.amount },
      replicas: { hours: replicas.quantity, amount: replicas.amount },
    },
    total: res.total,
    currency: res.currency,
  });
}
