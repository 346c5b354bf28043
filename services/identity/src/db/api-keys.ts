import type { RoleName } from "@dbaas/catalogue";
import type { Queryable } from "./queryable.ts";

export interface ApiKeyRow {
  id: string;
  name: string;
  scopes: string[];
  prefix: string;
  created_by: string;
  role: RoleName;
  created_at: Date;
  expires_at: Date | null;
}

const COLUMNS = "id, name, scopes, prefix, created_by, role, created_at, expires_at";

/** Stores a key; only the SHA-256 of its secret is kept. */
export async function insertApiKey(
  db: Queryable,
  key: {
    id: string;
    organizationId: string;
    createdBy: string;
    role: RoleName;
    name: string;
    scopes: string[];
    prefix: string;
    secretHash: Buffer;
    now: Date;
    expiresAt: Date | null;
  },
): Promise<ApiKeyRow> {
  const { rows } = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (id, organization_id, created_by, role, name, scopes, prefix, secret_hash, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     RETURNING ${COLUMNS}`,
    [key.id, key.organizationId, key.createdBy, key.role, key.name, key.scopes, key.prefix, key.secretHash, key.now, key.expiresAt],
  );
  return rows[0]!;
}

/** The organization's keys not revoked, oldest first: every one when `everyone`, else those `userId` created. */
export async function listApiKeys(db: Queryable, organizationId: string, everyone: boolean, userId: string): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT ${COLUMNS} FROM api_keys
     WHERE organization_id = $1 AND revoked_at IS NULL AND ($2 OR created_by = $3)
     ORDER BY created_at, id`,
    [organizationId, everyone, userId],
  );
  return rows;
}

/** Who created the organization's live key `id` (the key locked for the caller's transaction); undefined when there is none. */
export async function lockApiKeyCreator(db: Queryable, organizationId: string, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ created_by: string }>(
    "SELECT created_by FROM api_keys WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL FOR UPDATE",
    [id, organizationId],
  );
  return rows[0]?.created_by;
}

export async function revokeApiKey(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query("UPDATE api_keys SET revoked_at = $2 WHERE id = $1", [id, now]);
}
