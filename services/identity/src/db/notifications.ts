import type { Queryable } from "./queryable.ts";

/**
 * Records the notice `id` with its recipient count; false when the id was
 * recorded already. A concurrent call with the same id waits here until the
 * first commits (then false) or rolls back (then this one takes its place).
 */
export async function recordNotification(
  db: Queryable,
  n: { id: string; organizationId: string; recipients: number; now: Date },
): Promise<boolean> {
  const recorded = await db.query(
    `INSERT INTO notifications (id, organization_id, recipients, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (id) DO NOTHING`,
    [n.id, n.organizationId, n.recipients, n.now],
  );
  return Boolean(recorded.rowCount);
}

export async function findNotification(db: Queryable, id: string): Promise<{ organization_id: string; recipients: number } | undefined> {
  const { rows } = await db.query<{ organization_id: string; recipients: number }>(
    "SELECT organization_id, recipients FROM notifications WHERE id = $1",
    [id],
  );
  return rows[0];
}
