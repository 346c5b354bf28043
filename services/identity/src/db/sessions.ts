import type { Queryable } from "./queryable.ts";

/** Stores a login session acting through `membershipId`; only the token's hash is kept. */
export async function insertSession(
  db: Queryable,
  s: { id: string; membershipId: string; tokenHash: Buffer; now: Date; expiresAt: Date },
): Promise<void> {
  await db.query("INSERT INTO sessions (id, membership_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)", [
    s.id,
    s.membershipId,
    s.tokenHash,
    s.now,
    s.expiresAt,
  ]);
}

/** Clears the membership's sessions that expired before `before`. */
export async function deleteSessionsExpiredBefore(db: Queryable, membershipId: string, before: Date): Promise<void> {
  await db.query("DELETE FROM sessions WHERE membership_id = $1 AND expires_at < $2", [membershipId, before]);
}
