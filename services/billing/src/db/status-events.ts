import type pg from "pg";

/** What a status event is about: a database runs compute, a read replica is billed as replica hours. */
export type InstanceKind = "database" | "replica";

/**
 * A status change of a database or replica (`databaseId` holds either id) as
 * stored: the event's tier is what it ran at from then on.
 */
export interface StatusChange {
  eventId: string;
  organizationId: string;
  databaseId: string;
  kind: InstanceKind;
  tier: string;
  status: string;
  occurredAt: Date;
}

/**
 * Stores the changes not seen before and returns how many that was. One
 * statement, so a batch lands entirely or not at all; a repeated event_id
 * (redelivery, or twice in one batch) is skipped, the first copy wins. The
 * same statement schedules the months of the new changes for closing (see
 * invoice_schedule), locking schedule rows in one order so that concurrent
 * batches cannot deadlock.
 */
export async function insertStatusChanges(db: pg.Pool | pg.PoolClient, changes: StatusChange[]): Promise<number> {
  const result = await db.query<{ recorded: number }>(
    `WITH inserted AS (
       INSERT INTO status_events (event_id, organization_id, database_id, kind, tier, status, occurred_at)
       SELECT e.event_id, e.organization_id, e.database_id, e.kind, e.tier, e.status, e.occurred_at
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
              WITH ORDINALITY AS e(event_id, organization_id, database_id, kind, tier, status, occurred_at, ord)
        ORDER BY e.ord
       ON CONFLICT (event_id) DO NOTHING
       RETURNING organization_id, occurred_at
     ), scheduled AS (
       INSERT INTO invoice_schedule (organization_id, next_period)
       SELECT organization_id, date_trunc('month', min(occurred_at) AT TIME ZONE 'UTC')::date
         FROM inserted
        GROUP BY organization_id
        ORDER BY organization_id
       ON CONFLICT (organization_id) DO UPDATE SET next_period = excluded.next_period
        WHERE invoice_schedule.next_period > excluded.next_period
     )
     SELECT count(*)::int AS recorded FROM inserted`,
    [
      changes.map((c) => c.eventId),
      changes.map((c) => c.organizationId),
      changes.map((c) => c.databaseId),
      changes.map((c) => c.kind),
      changes.map((c) => c.tier),
      changes.map((c) => c.status),
      changes.map((c) => c.occurredAt.toISOString()),
    ],
  );
  return result.rows[0]!.recorded;
}

interface ChangeRow {
  event_id: string;
  database_id: string;
  kind: InstanceKind;
  tier: string;
  status: string;
  occurred_at: Date;
}

/**
 * The changes that decide an organization's running time within [from, to]:
 * each database's last change before `from` (the state it entered the period
 * in) followed by every change inside the period, ordered per database by
 * time, ties by arrival.
 */
export async function listStatusChangesForPeriod(
  db: pg.Pool | pg.PoolClient,
  organizationId: string,
  from: Date,
  to: Date,
): Promise<StatusChange[]> {
  const { rows } = await db.query<ChangeRow>(
    `(SELECT DISTINCT ON (database_id) event_id, database_id, kind, tier, status, occurred_at, seq
        FROM status_events
       WHERE organization_id = $1 AND occurred_at < $2
       ORDER BY database_id, occurred_at DESC, seq DESC)
     UNION ALL
     (SELECT event_id, database_id, kind, tier, status, occurred_at, seq
        FROM status_events
       WHERE organization_id = $1 AND occurred_at >= $2 AND occurred_at <= $3)
     ORDER BY database_id, occurred_at, seq`,
    [organizationId, from.toISOString(), to.toISOString()],
  );
  return rows.map((r) => ({
    eventId: r.event_id,
    organizationId,
    databaseId: r.database_id,
    kind: r.kind,
    tier: r.tier,
    status: r.status,
    occurredAt: r.occurred_at,
  }));
}

/** A database or replica as the last status event billing holds for it says. */
export interface DatabaseNow {
  databaseId: string;
  kind: InstanceKind;
  tier: string;
  status: string;
}

/** Each of the organization's databases and replicas with its latest status and tier, in id order. */
export async function latestDatabaseStatuses(db: pg.Pool | pg.PoolClient, organizationId: string): Promise<DatabaseNow[]> {
  const { rows } = await db.query<{ database_id: string; kind: InstanceKind; tier: string; status: string }>(
    `SELECT DISTINCT ON (database_id) database_id, kind, tier, status
       FROM status_events
      WHERE organization_id = $1
      ORDER BY database_id, occurred_at DESC, seq DESC`,
    [organizationId],
  );
  return rows.map((r) => ({ databaseId: r.database_id, kind: r.kind, tier: r.tier, status: r.status }));
}
