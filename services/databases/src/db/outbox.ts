// The transactional outbox: status events written with the change they describe, relayed to billing.
import type pg from "pg";
import { newId } from "@dbaas/kit";

const STATUS_TOPIC = "database.status";

/** A status event as stored (and as billing's StatusEvent carries it). */
export interface StatusPayload {
  event_id: string;
  organization_id: string;
  database_id: string;
  tier: string;
  status: string;
  occurred_at: string;
}

/** Queues a status event in the caller's transaction, under a new event id. */
export async function insertStatusEvent(
  db: pg.ClientBase,
  e: { organizationId: string; databaseId: string; tier: string; status: string; occurredAt: Date },
): Promise<void> {
  const eventId = newId("evt");
  const payload: StatusPayload = {
    event_id: eventId,
    organization_id: e.organizationId,
    database_id: e.databaseId,
    tier: e.tier,
    status: e.status,
    occurred_at: e.occurredAt.toISOString(),
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

export async function markDelivered(db: pg.ClientBase, ids: string[]): Promise<void> {
  await db.query("UPDATE outbox SET delivered_at = now() WHERE id = ANY($1::bigint[])", [ids]);
}

/** Keeps the events pending, saying why their delivery failed. */
export async function recordDeliveryFailure(db: pg.ClientBase, ids: string[], error: string): Promise<void> {
  await db.query("UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1::bigint[])", [ids, error.slice(0, 500)]);
}
