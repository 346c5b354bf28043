import type { RoleName } from "@dbaas/catalogue";
import type { Queryable } from "./queryable.ts";

/** A credential with what a principal is made of. */
export interface CredentialRow {
  id: string;
  user_id: string;
  organization_id: string;
  role: RoleName;
  plan: string;
  /** Null for a login session: it holds every scope. */
  scopes: string[] | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

// The session's role comes from the membership row as it is now: a demotion or
// removal takes effect on the very next call.
const SESSION_QUERY = `
  SELECT s.id, m.user_id, m.organization_id, m.role, o.plan, NULL::text[] AS scopes, s.expires_at, NULL::timestamptz AS revoked_at
  FROM sessions s
  JOIN memberships m ON m.id = s.membership_id
  JOIN organizations o ON o.id = m.organization_id
  WHERE s.token_hash = $1`;

// A key carries the role its creator had when creating it, and does not depend on their membership.
const API_KEY_QUERY = `
  SELECT k.id, k.created_by AS user_id, k.organization_id, k.role, o.plan, k.scopes, k.expires_at, k.revoked_at
  FROM api_keys k
  JOIN organizations o ON o.id = k.organization_id
  WHERE k.secret_hash = $1`;

/** The login session or API key whose secret hashes to `secretHash`. */
export async function findCredential(db: Queryable, kind: "session" | "api_key", secretHash: Buffer): Promise<CredentialRow | undefined> {
  const { rows } = await db.query<CredentialRow>(kind === "session" ? SESSION_QUERY : API_KEY_QUERY, [secretHash]);
  return rows[0];
}
