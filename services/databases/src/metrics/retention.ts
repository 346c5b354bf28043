import type { AppContext } from "../context.ts";
import { purgeReplicaLags } from "../db/replicas.ts";
import { latestRollup, purgeSamples, rollUp } from "../db/samples.ts";
import { ROLLUPS_RETENTION_MS, SAMPLES_RETENTION_MS } from "./query.ts";

const HOUR_MS = 3600_000;

/**
 * One pass of the samples' upkeep, by the context's clock: rolls up the
 * minutes of every whole hour since the newest one rolled up (that one again,
 * for samples that arrived late; at most the raw retention back), then
 * deletes raw samples and their minutes (and replicas' lags) past 7 days
 * and roll-ups past 30.
 */
export async function maintainSamples(ctx: AppContext): Promise<{ rolledUp: number; purged: number }> {
  const now = ctx.clock.now().getTime();
  const currentHour = Math.floor(now / HOUR_MS) * HOUR_MS;
  const latest = (await latestRollup(ctx.pool))?.getTime();
  const from = Math.max(latest ?? 0, Math.floor((now - SAMPLES_RETENTION_MS) / HOUR_MS) * HOUR_MS);
  const rolledUp = from < currentHour ? await rollUp(ctx.pool, new Date(from), new Date(currentHour)) : 0;
  const purged = await purgeSamples(ctx.pool, new Date(now - SAMPLES_RETENTION_MS), new Date(now - ROLLUPS_RETENTION_MS));
  const lags = await purgeReplicaLags(ctx.pool, new Date(now - SAMPLES_RETENTION_MS));
  return { rolledUp, purged: purged.samples + purged.minutes + purged.rollups + lags };
}
