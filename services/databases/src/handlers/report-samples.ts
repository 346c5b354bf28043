import { notFound, withTransaction } from "@dbaas/kit";
import type { ReportSamplesRequest } from "@dbaas/proto/agent";
import type { AppContext } from "../context.ts";
import { touchAgent } from "../db/agents.ts";
import { insertUsageEvents } from "../db/outbox.ts";
import { recordReplicaLags } from "../db/replicas.ts";
import { insertSamples } from "../db/samples.ts";
import { applyStorageSamples } from "../storage.ts";

/**
 * An agent's measurements of its instances. Only samples of databases placed
 * on that agent are kept; a resent sample (same database and sample id) is
 * ignored. The storage and transfer counters of the new ones are queued for
 * billing in the same transaction, so billing gets each sample exactly when
 * the metrics have it — but a replica's (billed by the hour, as replicas).
 * A primary's samples carry its replicas' lags: kept for the metrics and as
 * each replica's lag_bytes.
 */
export function reportSamples(ctx: AppContext) {
  return async (req: ReportSamplesRequest) => {
    if (!(await touchAgent(ctx.pool, req.agentId, ctx.clock.now()))) throw notFound("agent (register first)");
    await withTransaction(ctx.pool, async (db) => {
      const fresh = await insertSamples(db, req.agentId, req.samples);
      await insertUsageEvents(
        db,
        fresh.filter((s) => s.billable),
      );
      await recordReplicaLags(db, req.agentId, req.samples);
      // A database at its tier's storage turns read-only, and writable again below 95 %.
      await applyStorageSamples(ctx, db, fresh);
    });
    return {};
  };
}
