import type { Queryable } from "./queryable.ts";

export interface OrganizationRow {
  id: string;
  name: string;
  /** A plan name (services/catalogue SUPPORT_PLANS). */
  plan: string;
  created_at: Date;
}

const COLUMNS = "id, name, plan, created_at";

export async function findOrganization(db: Queryable, id: string): Promise<OrganizationRow | undefined> {
  const { rows } = await db.query<OrganizationRow>(`SELECT ${COLUMNS} FROM organizations WHERE id = $1`, [id]);
  return rows[0];
}

/** The organization locked for the caller's transaction (FOR UPDATE). */
export async function lockOrganization(db: Queryable, id: string): Promise<OrganizationRow | undefined> {
  const { rows } = await db.query<OrganizationRow>(`SELECT ${COLUMNS} FROM organizations WHERE id = $1 FOR UPDATE`, [id]);
  return rows[0];
}

export async function organizationExists(db: Queryable, id: string): Promise<boolean> {
  return Boolean((await db.query("SELECT 1 FROM organizations WHERE id = $1", [id])).rowCount);
}

/** A new organization on the free plan. */
export async function insertOrganization(db: Queryable, org: { id: string; name: string; now: Date }): Promise<OrganizationRow> {
  const { rows } = await db.query<OrganizationRow>(
    `INSERT INTO organizations (id, name, plan, created_at, updated_at) VALUES ($1, $2, 'free', $3, $3)
     RETURNING ${COLUMNS}`,
    [org.id, org.name, org.now],
  );
  return rows[0]!;
}

/** Sets what is given (undefined keeps the column) and returns the row as it is now. */
export async function updateOrganization(
  db: Queryable,
  id: string,
  change: { name: string | undefined; plan: string | undefined },
  now: Date,
): Promise<OrganizationRow> {
  const { rows } = await db.query<OrganizationRow>(
    `UPDATE organizations SET name = COALESCE($2, name), plan = COALESCE($3, plan), updated_at = $4
     WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, change.name ?? null, change.plan ?? null, now],
  );
  return rows[0]!;
}

/** Deletes the organization; memberships, sessions, API keys, invitations and their unsent mails go with it (ON DELETE CASCADE). */
export async function deleteOrganization(db: Queryable, id: string): Promise<boolean> {
  return Boolean((await db.query("DELETE FROM organizations WHERE id = $1", [id])).rowCount);
}
