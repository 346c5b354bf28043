import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { StatusEventSchema, UsageSampleSchema } from "@dbaas/proto/billing";
import { withTransaction } from "@dbaas/kit";
import type pg from "pg";
import type { AppContext } from "./context.ts";
import { claimStatusEvents, claimUsageEvents, markDelivered, purgeDelivered, recordDeliveryFailure } from "./db/outbox.ts";

/**
 * One batch of one outbox topic to billing: claims up to `batchSize` pending
 * rows (SKIP LOCKED lets several replicas relay without sending a batch twice
 * at once), sends them, and marks them delivered only after billing
 * acknowledged them, so a crash or a billing outage means redelivery (billing
 * ignores duplicates), never loss. Returns how many were delivered.
 */
async function relayBatch<P>(
  ctx: AppContext,
  claim: (db: pg.ClientBase, limit: number) => Promise<{ id: string; payload: P }[]>,
  send: (payloads: P[]) => Promise<unknown>,
  batchSize: number,
): Promise<number> {
  const result = await withTransaction(ctx.pool, async (db) => {
    const rows = await claim(db, batchSize);
    if (rows.length === 0) return { delivered: 0 };
    const ids = rows.map((r) => r.id);
    try {
      await send(rows.map((r) => r.payload));
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

/** Status events (billing's compute hours), oldest first; billing ignores an event id it has seen. */
export function relayOutboxOnce(ctx: AppContext, batchSize = 100): Promise<number> {
  return relayBatch(
    ctx,
    claimStatusEvents,
    (events) =>
      ctx.billing.recordStatusEvents(
        {
          events: events.map((p) =>
            create(StatusEventSchema, {
              eventId: p.event_id,
              organizationId: p.organization_id,
              databaseId: p.database_id,
              tier: p.tier,
              status: p.status,
              occurredAt: timestampFromDate(new Date(p.occurred_at)),
              kind: p.kind ?? "database",
            }),
          ),
        },
        { timeoutMs: 10_000 },
      ),
    batchSize,
  );
}

/** Usage samples (storage and transfer counters); billing ignores a (database, sample) it has recorded. */
export function relayUsageOnce(ctx: AppContext, batchSize = 500): Promise<number> {
  return relayBatch(
    ctx,
    claimUsageEvents,
    (samples) =>
      ctx.billing.recordUsageSamples(
        {
          samples: samples.map((p) =>
            create(UsageSampleSchema, {
              organizationId: p.organization_id,
              databaseId: p.database_id,
              sampleId: p.sample_id,
              sampledAt: timestampFromDate(new Date(p.sampled_at)),
              storageBytes: BigInt(p.storage_bytes),
              countersEpoch: p.counters_epoch,
              networkBytesIn: BigInt(p.network_bytes_in),
              networkBytesOut: BigInt(p.network_bytes_out),
            }),
          ),
        },
        { timeoutMs: 10_000 },
      ),
    batchSize,
  );
}

/**
 * Deletes the outbox rows delivered more than OUTBOX_DELIVERED_RETENTION_HOURS
 * ago by the context's clock (usage samples alone queue ~2,880 a database a
 * day), in batches of `batchSize`, each its own statement; pending rows stay
 * however old. Returns how many were deleted.
 */
export async function purgeDeliveredOutbox(ctx: AppContext, batchSize = 5000): Promise<number> {
  const before = new Date(ctx.clock.now().getTime() - ctx.cfg.outboxDeliveredRetentionHours * 3600_000);
  let purged = 0;
  for (;;) {
    const n = await purgeDelivered(ctx.pool, before, batchSize);
    purged += n;
    if (n < batchSize) return purged;
  }
}
