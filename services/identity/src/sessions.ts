import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type pg from "pg";
import { newId } from "@dbaas/kit";
import { TokenSchema, type Token } from "@dbaas/proto/identity";
import { hashSecret, newSessionToken } from "./credentials.ts";

// Expired sessions are kept this long so their holders are told "token expired"
// rather than "invalid token"; after that they are cleared out.
const EXPIRED_SESSION_RETENTION_MS = 24 * 3600 * 1000;

/** Creates a login token acting through `membershipId`; only its hash is stored. */
export async function issueSession(
  db: pg.Pool | pg.PoolClient,
  membershipId: string,
  now: Date,
  ttlSeconds: number,
): Promise<Token> {
  const token = newSessionToken();
  const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
  await db.query("DELETE FROM sessions WHERE membership_id = $1 AND expires_at < $2", [
    membershipId,
    new Date(now.getTime() - EXPIRED_SESSION_RETENTION_MS),
  ]);
  await db.query(
    "INSERT INTO sessions (id, membership_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)",
    [newId("tok"), membershipId, hashSecret(token), now, expiresAt],
  );
  return create(TokenSchema, { accessToken: token, tokenType: "Bearer", expiresAt: timestampFromDate(expiresAt) });
}
