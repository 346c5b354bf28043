// The transactional outbox: status events written with the change they describe, relayed to billing.
import type pg from "pg";
import { newId } from "@dbaas/kit";
import type { NewSample } from "./samples.ts";

const STATUS_TOPIC = "database.status";
const USAGE_TOPIC = "database.usage";

/** A status event as stored (and as billing's StatusEvent carries it). */
export interface StatusPayload {
  event_id: string;
  organization_id: string;
  database_id: string;
  tier: string;
  status: string;
  occurred_at: string;
  /** "database" or "replica" (billing bills a replica's running time as usage.replicas); absent in events queued before replicas. */
  kind?: "database" | "replica";
}

/** Queues a status event in the caller's transaction, under a new event id. */
export async function insertStatusEvent(
  db: pg.ClientBase,
  e: { organizationId: string; databaseId: string; tier: string; status: string; occurredAt: Date; kind: "database" | "replica" },
): Promise<void> {
  const eventId = newId("evt");
  const payload: StatusPayload = {
    event_id: eventId,
    organization_id: e.organizationId,
    database_id: e.databaseId,
    tier: e.tier,
    status: e.status,
    occurred_at: e.occurredAt.toISOString(),
    kind: e.kind,
  };
  await db.query("INSERT INTO outbox (event_id, topic, payload) VALUES ($1, $2, $3)", [eventId, STATUS_TOPIC, payload]);
}

/**
 * Up to `limit` undelivered status events, oldest first, locked for the
 * caller's transaction; events another relay holds are skipped, not waited for.
 */
export async function claimStatusEvents(db: pg.ClientBase, limit: number): Promise<{ id: string; payload: StatusPayload }[]> {
  const { rows } = await db.query<{ id: string; payload: StatusPayload }>(
    `SELECT id, payload FROM outbox WHERE delivered_at IS NULL AND topic = $2
     ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [limit, STATUS_TOPIC],
  );
  return rows;
}

/** A usage sample as stored (and as billing's UsageSample carries it). */
export interface UsagePayload {
  organization_id: string;
  database_id: string;
  sample_id: string;
  sampled_at: string;
  storage_bytes: string;
  counters_epoch: string;
  network_bytes_in: string;
  network_bytes_out: string;
}

/** Queues usage samples for billing in the caller's transaction; one event per (database, sample), so a resent one is queued once. */
export async function insertUsageEvents(db: pg.ClientBase, samples: NewSample[]): Promise<void> {
  if (samples.length === 0) return;
  const payloads: UsagePayload[] = samples.map((s) => ({
    organization_id: s.organization_id,
    database_id: s.database_id,
    sample_id: s.sample_id,
    sampled_at: s.sampled_at.toISOString(),
    storage_bytes: s.storage_bytes,
    counters_epoch: s.counters_epoch,
    network_bytes_in: s.network_bytes_in,
    network_bytes_out: s.network_bytes_out,
  }));
  await db.query(
    `INSERT INTO outbox (event_id, topic, payload)
     SELECT 'use-' || (p->>'database_id') || '-' || (p->>'sample_id'), $2, p FROM unnest($1::jsonb[]) AS p
     ON CONFLICT (event_id) DO NOTHING`,
    [payloads, USAGE_TOPIC],
  );
}

/** Up to `limit` undelivered usage samples, oldest first, locked like {@link claimStatusEvents}. */
export async function claimUsageEvents(db: pg.ClientBase, limit: number): Promise<{ id: string; payload: UsagePayload }[]> {
  const { rows } = await db.query<{ id: string; payload: UsagePayload }>(
    `SELECT id, payload FROM outbox WHERE delivered_at IS NULL AND topic = $2
     ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [limit, USAGE_TOPIC],
  );
  return rows;
}

export async function markDelivered(db: pg.ClientBase, ids: string[]): Promise<void> {
  await db.query("UPDATE outbox SET delivered_at = now() WHERE id = ANY($1::bigint[])", [ids]);
}

/**
 * Deletes up to `limit` rows delivered before `before`, oldest first, and
 * returns how many: a bounded statement, so the purge never holds many row
 * locks or one long transaction. Walks the primary key from the oldest id,
 * where delivered rows are; pending rows are never touched.
 */
export async function purgeDelivered(db: pg.Pool | pg.ClientBase, before: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM outbox WHERE id IN (
       SELECT id FROM outbox WHERE delivered_at < $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [before, limit],
  );
  return rowCount ?? 0;
}

/** Keeps the events pending, saying why their delivery failed. */
export async function recordDeliveryFailure(db: pg.ClientBase, ids: string[], error: string): Promise<void> {
  await db.query("UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1::bigint[])", [ids, error.slice(0, 500)]);
}
