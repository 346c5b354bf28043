import type { AppContext } from "../context.ts";
import { markDetached, pendingDetachments, type Detachment } from "../db/payment-methods.ts";
import { ProcessorError } from "../processor/processor.ts";

/** Removed methods read per query by the background run. */
const BATCH = 100;

/** Asks the processor to let go of one removed method; true once it has. Failures are logged, never thrown. */
async function detachOne(ctx: AppContext, d: Detachment): Promise<boolean> {
  const fields = { organization_id: d.organizationId, payment_method_id: d.id, processor: d.processor };
  try {
    await ctx.processor.detachCard(d.customerRef, d.processorRef);
    await markDetached(ctx.pool, d.id, ctx.clock.now());
  } catch (err) {
    const retryable = err instanceof ProcessorError ? err.retryable : true;
    ctx.log.warn("detaching a removed payment method failed; retried later", { ...fields, retryable, error: err });
    return false;
  }
  ctx.log.info("payment method detached at the processor", fields);
  return true;
}

/**
 * Detaches removed payment methods at the processor: the one named by `id`
 * right after its removal committed, or, in the background, every one still
 * attached (a detach that failed, or a process that died before asking),
 * until none is left or `signal` aborts. The processor's detach is
 * idempotent, so a method detached twice (two replicas, a lost answer) is
 * harmless. Returns how many were detached.
 */
export async function detachRemovedPaymentMethods(ctx: AppContext, opts: { id?: string; signal?: AbortSignal } = {}): Promise<number> {
  const tried: string[] = [];
  let detached = 0;
  while (!opts.signal?.aborted) {
    const batch = await pendingDetachments(ctx.pool, ctx.processor.name, { id: opts.id, skip: tried, limit: BATCH });
    if (batch.length === 0) break;
    for (const d of batch) {
      if (opts.signal?.aborted) break;
      tried.push(d.id);
      if (await detachOne(ctx, d)) detached++;
    }
  }
  return detached;
}
