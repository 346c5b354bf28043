import type { RoleName } from "@dbaas/catalogue";
import type { Queryable } from "./queryable.ts";

export interface InvitationRow {
  id: string;
  organization_id: string;
  email: string;
  role: RoleName;
  /** pending, accepted, cancelled, or expired (superseded by a new invitation of the address). */
  status: string;
  invited_by: string;
  created_at: Date;
  expires_at: Date;
}

const COLUMNS = "id, organization_id, email, role, status, invited_by, created_at, expires_at";

/** Marks the address's pending invitations that expired by `now` as expired, so they no longer block a new one. */
export async function expirePending(db: Queryable, organizationId: string, email: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE invitations SET status = 'expired', finished_at = $3
     WHERE organization_id = $1 AND lower(email) = lower($2) AND status = 'pending' AND expires_at <= $3`,
    [organizationId, email, now],
  );
}

/** A pending invitation; only the token's hash is kept. One pending per address (invitations_one_pending). */
export async function insertInvitation(
  db: Queryable,
  inv: {
    id: string;
    organizationId: string;
    email: string;
    role: RoleName;
    tokenHash: Buffer;
    invitedBy: string;
    now: Date;
    expiresAt: Date;
  },
): Promise<InvitationRow> {
  const { rows } = await db.query<InvitationRow>(
    `INSERT INTO invitations (id, organization_id, email, role, status, token_hash, invited_by, created_at, expires_at)
     VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8) RETURNING ${COLUMNS}`,
    [inv.id, inv.organizationId, inv.email, inv.role, inv.tokenHash, inv.invitedBy, inv.now, inv.expiresAt],
  );
  return rows[0]!;
}

/** The organization's pending invitations (expired ones included), oldest first. */
export async function listPendingInvitations(db: Queryable, organizationId: string): Promise<InvitationRow[]> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${COLUMNS} FROM invitations
     WHERE organization_id = $1 AND status = 'pending'
     ORDER BY created_at, id`,
    [organizationId],
  );
  return rows;
}

/** Cancels the organization's pending invitation `id`; false when there is none. */
export async function cancelInvitation(db: Queryable, organizationId: string, id: string, now: Date): Promise<boolean> {
  const updated = await db.query(
    `UPDATE invitations SET status = 'cancelled', finished_at = $3
     WHERE id = $1 AND organization_id = $2 AND status = 'pending'`,
    [id, organizationId, now],
  );
  return Boolean(updated.rowCount);
}

export async function findInvitationByToken(db: Queryable, tokenHash: Buffer): Promise<InvitationRow | undefined> {
  const { rows } = await db.query<InvitationRow>(`SELECT ${COLUMNS} FROM invitations WHERE token_hash = $1`, [tokenHash]);
  return rows[0];
}

/** The invitation locked for the caller's transaction. */
export async function lockInvitation(db: Queryable, id: string): Promise<InvitationRow | undefined> {
  const { rows } = await db.query<InvitationRow>(`SELECT ${COLUMNS} FROM invitations WHERE id = $1 FOR UPDATE`, [id]);
  return rows[0];
}

export async function markAccepted(db: Queryable, id: string, userId: string, now: Date): Promise<void> {
  await db.query("UPDATE invitations SET status = 'accepted', accepted_by = $2, finished_at = $3 WHERE id = $1", [id, userId, now]);
}
