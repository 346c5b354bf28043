import type { RoleName } from "@dbaas/catalogue";
import type { Queryable } from "./queryable.ts";

/** A membership with its user, as member records show it. */
export interface MemberRow {
  id: string;
  user_id: string;
  email: string;
  name: string;
  role: RoleName;
  created_at: Date;
}

const MEMBER = "SELECT m.id, m.user_id, u.email, u.name, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id";

export async function insertMembership(
  db: Queryable,
  m: { id: string; organizationId: string; userId: string; role: RoleName; now: Date },
): Promise<void> {
  await db.query("INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5)", [
    m.id,
    m.organizationId,
    m.userId,
    m.role,
    m.now,
  ]);
}

/** Like insertMembership, but false (nothing written) when the user is a member already. */
export async function joinOrganization(
  db: Queryable,
  m: { id: string; organizationId: string; userId: string; role: RoleName; now: Date },
): Promise<boolean> {
  const joined = await db.query(
    `INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (organization_id, user_id) DO NOTHING`,
    [m.id, m.organizationId, m.userId, m.role, m.now],
  );
  return Boolean(joined.rowCount);
}

/** The user's membership in `organizationId`, or their oldest one when no organization is named. */
export async function findMembershipId(db: Queryable, userId: string, organizationId: string): Promise<string | undefined> {
  const { rows } = organizationId
    ? await db.query<{ id: string }>("SELECT id FROM memberships WHERE user_id = $1 AND organization_id = $2", [userId, organizationId])
    : await db.query<{ id: string }>("SELECT id FROM memberships WHERE user_id = $1 ORDER BY created_at, id LIMIT 1", [userId]);
  return rows[0]?.id;
}

export async function listMembers(db: Queryable, organizationId: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(`${MEMBER} WHERE m.organization_id = $1 ORDER BY m.created_at, m.id`, [organizationId]);
  return rows;
}

export async function findMember(db: Queryable, id: string): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(`${MEMBER} WHERE m.id = $1`, [id]);
  return rows[0];
}

/** The organization's member `memberId`, its membership locked for the caller's transaction. */
export async function lockMember(db: Queryable, organizationId: string, memberId: string): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(`${MEMBER} WHERE m.id = $1 AND m.organization_id = $2 FOR UPDATE OF m`, [
    memberId,
    organizationId,
  ]);
  return rows[0];
}

/** The members among `userIds`, their memberships locked (in id order, so two transfers never deadlock). */
export async function lockMembersByUser(db: Queryable, organizationId: string, userIds: string[]): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(
    `${MEMBER} WHERE m.organization_id = $1 AND m.user_id = ANY($2) ORDER BY m.id FOR UPDATE OF m`,
    [organizationId, userIds],
  );
  return rows;
}

export async function setRole(db: Queryable, membershipId: string, role: RoleName): Promise<void> {
  await db.query("UPDATE memberships SET role = $2 WHERE id = $1", [membershipId, role]);
}

/** Ends a membership; its login sessions go with it (ON DELETE CASCADE), API keys stay. */
export async function deleteMembership(db: Queryable, membershipId: string): Promise<void> {
  await db.query("DELETE FROM memberships WHERE id = $1", [membershipId]);
}

/** The user's role in the organization, undefined for a non-member. */
export async function roleIn(db: Queryable, organizationId: string, userId: string): Promise<RoleName | undefined> {
  const { rows } = await db.query<{ role: RoleName }>("SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2", [
    organizationId,
    userId,
  ]);
  return rows[0]?.role;
}

/** A member's role and what checking their password needs. */
export async function findMemberLogin(
  db: Queryable,
  organizationId: string,
  userId: string,
): Promise<{ role: RoleName; email: string; password_hash: string } | undefined> {
  const { rows } = await db.query<{ role: RoleName; email: string; password_hash: string }>(
    `SELECT m.role, u.email, u.password_hash FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.organization_id = $1 AND m.user_id = $2`,
    [organizationId, userId],
  );
  return rows[0];
}

export async function isMember(db: Queryable, organizationId: string, userId: string): Promise<boolean> {
  return Boolean(
    (await db.query("SELECT 1 FROM memberships WHERE organization_id = $1 AND user_id = $2", [organizationId, userId])).rowCount,
  );
}

export async function emailIsMember(db: Queryable, organizationId: string, email: string): Promise<boolean> {
  const found = await db.query(
    `SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.organization_id = $1 AND lower(u.email) = lower($2)`,
    [organizationId, email],
  );
  return Boolean(found.rowCount);
}

/** The e-mail addresses of the members holding one of `roles`, oldest membership first. */
export async function memberEmails(db: Queryable, organizationId: string, roles: readonly RoleName[]): Promise<string[]> {
  const { rows } = await db.query<{ email: string }>(
    `SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.organization_id = $1 AND m.role = ANY($2) ORDER BY m.created_at, m.id`,
    [organizationId, roles],
  );
  return rows.map((r) => r.email);
}
