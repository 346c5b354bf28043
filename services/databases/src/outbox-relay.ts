import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { StatusEventSchema } from "@dbaas/proto/billing";
import { withTransaction } from "@dbaas/kit";
import type { AppContext } from "./context.ts";
import { claimStatusEvents, markDelivered, recordDeliveryFailure } from "./db/outbox.ts";

/**
 * Delivers outbox events to billing, oldest first, in batches. A batch is
 * marked delivered only after billing acknowledged it, so a crash or a billing
 * outage means redelivery (billing ignores duplicates by event id), never loss.
 * SKIP LOCKED lets several replicas relay without sending a batch twice at once.
 * Returns how many events were delivered.
 */
export async function relayOutboxOnce(ctx: AppContext, batchSize = 100): Promise<number> {
  const result = await withTransaction(ctx.pool, async (db) => {
    const rows = await claimStatusEvents(db, batchSize);
    if (rows.length === 0) return { delivered: 0 };
    const ids = rows.map((r) => r.id);
    try {
      await ctx.billing.recordStatusEvents(
        {
          events: rows.map(({ payload: p }) =>
            create(StatusEventSchema, {
              eventId: p.event_id,
              organizationId: p.organization_id,
              databaseId: p.database_id,
              tier: p.tier,
              status: p.status,
              occurredAt: timestampFromDate(new Date(p.occurred_at)),
            }),
          ),
        },
        { timeoutMs: 10_000 },
      );
    } catch (err) {
      // Recorded in this transaction, which commits: the rows stay pending and say why.
      await recordDeliveryFailure(db, ids, (err as Error).message);
      return { delivered: 0, error: err };
    }
    await markDelivered(db, ids);
    return { delivered: rows.length };
  });
  if ("error" in result) throw result.error;
  return result.delivered;
}
