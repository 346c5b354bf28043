// Notifications queued inside the writing transaction, so they arrive (through change-feed.ts) only after commit.
import type pg from "pg";
import { AGENT_CHANNEL, DATABASE_CHANNEL, notify } from "../change-feed.ts";

/** Tells the owning agent's watch stream to re-send its desired state. */
export function notifyAgent(db: pg.ClientBase, agentId: string): Promise<void> {
  return notify(db, AGENT_CHANNEL, agentId);
}

/** Wakes whoever waits for a report on the database (a reset-password waiting for its new credentials). */
export function notifyReported(db: pg.ClientBase, databaseId: string): Promise<void> {
  return notify(db, DATABASE_CHANNEL, databaseId);
}

/** Tells the agent of primary `primaryId` to re-send its desired state (a standby's change reaches its spec). */
export async function notifyPrimaryAgent(db: pg.ClientBase, primaryId: string): Promise<void> {
  const { rows } = await db.query<{ agent_id: string }>("SELECT agent_id FROM databases WHERE id = $1", [primaryId]);
  if (rows[0]) await notifyAgent(db, rows[0].agent_id);
}
