import type { Queryable } from "./queryable.ts";

/** A mail due to be sent, its body sealed (mail.ts, Sealer). */
export interface OutboxRow {
  id: string;
  message_id: string;
  recipient: string;
  subject: string;
  sealed_body: Buffer;
  attempts: number;
}

export async function insertMail(
  db: Queryable,
  mail: { messageId: string; invitationId: string | null; recipient: string; subject: string; sealedBody: Buffer; now: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO mail_outbox (message_id, invitation_id, recipient, subject, sealed_body, created_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6)`,
    [mail.messageId, mail.invitationId, mail.recipient, mail.subject, mail.sealedBody, mail.now],
  );
}

/** Drops the invitation's mail unless the relay is sending it right now (then the link is dead anyway). */
export async function withdrawInvitationMail(db: Queryable, invitationId: string): Promise<void> {
  await db.query(
    `DELETE FROM mail_outbox WHERE id IN (
       SELECT id FROM mail_outbox WHERE invitation_id = $1 AND sent_at IS NULL FOR UPDATE SKIP LOCKED)`,
    [invitationId],
  );
}

/** The next mail due by `now`, locked for the caller's transaction; one another relay holds is skipped. */
export async function claimDueMail(db: Queryable, now: Date): Promise<OutboxRow | undefined> {
  const { rows } = await db.query<OutboxRow>(
    `SELECT id, message_id, recipient, subject, sealed_body, attempts FROM mail_outbox
     WHERE sent_at IS NULL AND next_attempt_at <= $1
     ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
    [now],
  );
  return rows[0];
}

/** Sent: the body is dropped, the row kept as a record. */
export async function markMailSent(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query("UPDATE mail_outbox SET sent_at = $2, sealed_body = NULL, attempts = attempts + 1, last_error = NULL WHERE id = $1", [
    id,
    now,
  ]);
}

export async function markMailFailed(
  db: Queryable,
  id: string,
  failure: { attempts: number; error: string; retryAt: Date },
): Promise<void> {
  await db.query("UPDATE mail_outbox SET attempts = $2, last_error = $3, next_attempt_at = $4 WHERE id = $1", [
    id,
    failure.attempts,
    failure.error,
    failure.retryAt,
  ]);
}

export async function deleteMailSentBefore(db: Queryable, before: Date): Promise<void> {
  await db.query("DELETE FROM mail_outbox WHERE sent_at < $1", [before]);
}
