import type { AppContext } from "../context.ts";
import { deleteSamplesBefore } from "../db/usage-samples.ts";

const DAY_MS = 86_400_000;

/**
 * The oldest a usage sample may be, by the context's clock: what it accrued is
 * kept in metered_months and transfer_epochs, and the sample itself only as
 * the neighbour a later-arriving one is fitted against, so older samples are
 * purged and one arriving older than this is ignored (its neighbours may be gone).
 */
export function sampleHorizon(ctx: AppContext): Date {
  return new Date(ctx.clock.now().getTime() - ctx.usageSampleRetentionDays * DAY_MS);
}

/**
 * Deletes the samples past the horizon, `batchSize` a statement, and returns
 * how many. Samples up to STORAGE_SAMPLE_MAX_GAP_MS before it stay: the
 * storage held before a sample at the horizon reaches back that far, so its
 * predecessor must still be there when it arrives.
 */
export async function purgeUsageSamples(ctx: AppContext, batchSize = 5000): Promise<number> {
  const before = new Date(sampleHorizon(ctx).getTime() - ctx.storageMaxGapMs);
  let purged = 0;
  for (;;) {
    const n = await deleteSamplesBefore(ctx.pool, before, batchSize);
    purged += n;
    if (n < batchSize) return purged;
  }
}
