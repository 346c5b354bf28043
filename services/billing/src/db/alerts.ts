import type pg from "pg";

type Db = pg.Pool | pg.PoolClient;

export interface AlertRow {
  id: string;
  organization_id: string;
  threshold: number;
  currency: string;
  channels: string[];
  created_at: Date;
}

/** A month as the `date` columns store it: its first day. */
const day = (monthStart: Date) => monthStart.toISOString().slice(0, 10);

const ALERT_COLUMNS = "id, organization_id, threshold, currency, channels, created_at";

/**
 * Serialises, per organization, what changes its alerts: creation (so the cap
 * holds under concurrent requests), removal, and firing (so that once a
 * removal has committed, no check fires the alert any more).
 */
export async function lockAlerts(db: pg.PoolClient, organizationId: string): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`billing:alerts:${organizationId}`]);
}

export async function countAlerts(db: Db, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM alerts WHERE organization_id = $1 AND removed_at IS NULL",
    [organizationId],
  );
  return rows[0]!.n;
}

/** The organization's alerts that are not removed, oldest first. */
export async function listAlerts(db: Db, organizationId: string): Promise<AlertRow[]> {
  const { rows } = await db.query<Omit<AlertRow, "threshold"> & { threshold: string }>(
    `SELECT ${ALERT_COLUMNS} FROM alerts WHERE organization_id = $1 AND removed_at IS NULL ORDER BY created_at, id`,
    [organizationId],
  );
  return rows.map((r) => ({ ...r, threshold: Number(r.threshold) }));
}

/**
 * Removes one of the organization's alerts, under lockAlerts: it stops firing,
 * and the notices of its earlier firings that are still undelivered are given
 * up (`abandoned_at`, "alert removed"), so nobody is mailed about an alert
 * they removed. False when there is no such alert (unknown, another
 * organization's, or removed already).
 */
export async function removeAlert(db: pg.PoolClient, organizationId: string, id: string, now: Date): Promise<boolean> {
  const removed = await db.query("UPDATE alerts SET removed_at = $3 WHERE id = $1 AND organization_id = $2 AND removed_at IS NULL", [
    id,
    organizationId,
    now,
  ]);
  if (removed.rowCount !== 1) return false;
  await db.query(
    `UPDATE alert_notifications SET abandoned_at = $2, last_error = 'alert removed'
      WHERE alert_id = $1 AND delivered_at IS NULL AND abandoned_at IS NULL`,
    [id, now],
  );
  return true;
}

export async function insertAlert(db: Db, alert: AlertRow): Promise<void> {
  await db.query(`INSERT INTO alerts (id, organization_id, threshold, currency, channels, created_at) VALUES ($1, $2, $3, $4, $5, $6)`, [
    alert.id,
    alert.organization_id,
    alert.threshold,
    alert.currency,
    alert.channels,
    alert.created_at,
  ]);
}

/**
 * Organizations, in id order after `after`, with an alert that has not fired
 * in the month starting at `period`: those whose totals are worth reading.
 */
export async function organizationsWithUnfiredAlerts(db: Db, period: Date, after: string, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ organization_id: string }>(
    `SELECT DISTINCT a.organization_id FROM alerts a
      WHERE a.organization_id > $2 AND a.removed_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM alert_firings f WHERE f.alert_id = a.id AND f.period = $1::date)
      ORDER BY a.organization_id LIMIT $3`,
    [day(period), after, limit],
  );
  return rows.map((r) => r.organization_id);
}

export interface FiredAlert {
  id: string;
  threshold: number;
  currency: string;
}

/**
 * Records a firing, for the month starting at `period`, of each of the
 * organization's alerts whose threshold `total` reaches and that has not fired
 * in that month yet, and is not removed; call under lockAlerts, so a removal
 * either commits first or waits for this firing (and then drops its notice).
 * Returns only the alerts this call fired: a concurrent evaluator that got
 * there first keeps its firing and this one adds nothing.
 */
export async function fireAlerts(db: pg.PoolClient, organizationId: string, period: Date, total: number, now: Date): Promise<FiredAlert[]> {
  const { rows } = await db.query<{ id: string; threshold: string; currency: string }>(
    `WITH fired AS (
       INSERT INTO alert_firings (alert_id, period, total, fired_at)
       SELECT id, $2::date, $3, $4 FROM alerts WHERE organization_id = $1 AND threshold <= $3 AND removed_at IS NULL
       ON CONFLICT (alert_id, period) DO NOTHING
       RETURNING alert_id
     )
     SELECT a.id, a.threshold, a.currency FROM alerts a JOIN fired ON fired.alert_id = a.id ORDER BY a.threshold, a.id`,
    [organizationId, day(period), total, now],
  );
  return rows.map((r) => ({ id: r.id, threshold: Number(r.threshold), currency: r.currency }));
}

export interface AlertNotification {
  notificationId: string;
  alertId: string;
  /** First instant of the month the alert fired in. */
  period: Date;
  organizationId: string;
  subject: string;
  body: string;
}

/** Queues the notice of a firing; call in the transaction that recorded it, so neither exists without the other. */
export async function insertNotification(db: pg.PoolClient, n: AlertNotification, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO alert_notifications (notification_id, alert_id, period, organization_id, subject, body, created_at, next_attempt_at)
     VALUES ($1, $2, $3::date, $4, $5, $6, $7, $7)`,
    [n.notificationId, n.alertId, day(n.period), n.organizationId, n.subject, n.body, now],
  );
}

export interface PendingNotification {
  notificationId: string;
  alertId: string;
  organizationId: string;
  subject: string;
  body: string;
  /** Including the one just claimed. */
  attempts: number;
}

/**
 * Claims the oldest notice due by `now` for one attempt: counts the attempt
 * and leases the notice until `leaseUntil`, so no other relay sends it
 * meanwhile. A relay that dies before settling it leaves the lease to run
 * out, and the notice is sent again. One statement, so nothing stays locked
 * while identity is asked.
 */
export async function claimDueNotification(db: Db, now: Date, leaseUntil: Date): Promise<PendingNotification | undefined> {
  const { rows } = await db.query<{
    notification_id: string;
    alert_id: string;
    organization_id: string;
    subject: string;
    body: string;
    attempts: number;
  }>(
    `UPDATE alert_notifications SET attempts = attempts + 1, next_attempt_at = $2
      WHERE notification_id = (
        SELECT notification_id FROM alert_notifications
         WHERE delivered_at IS NULL AND abandoned_at IS NULL AND next_attempt_at <= $1
         ORDER BY next_attempt_at, notification_id LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING notification_id, alert_id, organization_id, subject, body, attempts`,
    [now, leaseUntil],
  );
  const r = rows[0];
  return (
    r && {
      notificationId: r.notification_id,
      alertId: r.alert_id,
      organizationId: r.organization_id,
      subject: r.subject,
      body: r.body,
      attempts: r.attempts,
    }
  );
}

/**
 * Identity took the notice. It may have been given up meanwhile (its alert
 * removed while the notice was on its way): identity's answer is the truth, so
 * the notice counts as delivered.
 */
export async function markDelivered(db: Db, notificationId: string, recipients: number, now: Date): Promise<void> {
  await db.query(
    "UPDATE alert_notifications SET delivered_at = $2, recipients = $3, last_error = NULL, abandoned_at = NULL WHERE notification_id = $1",
    [notificationId, now, recipients],
  );
}

/** A notice given up meanwhile (its alert removed) keeps that reason and is not retried. */
export async function markFailed(db: Db, notificationId: string, error: string, retryAt: Date): Promise<void> {
  await db.query(
    "UPDATE alert_notifications SET last_error = $2, next_attempt_at = $3 WHERE notification_id = $1 AND abandoned_at IS NULL",
    [notificationId, error.slice(0, 1000), retryAt],
  );
}

export async function markAbandoned(db: Db, notificationId: string, error: string, now: Date): Promise<void> {
  await db.query("UPDATE alert_notifications SET last_error = $2, abandoned_at = $3 WHERE notification_id = $1 AND abandoned_at IS NULL", [
    notificationId,
    error.slice(0, 1000),
    now,
  ]);
}
