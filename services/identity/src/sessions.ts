import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { newId } from "@dbaas/kit";
import { TokenSchema, type Token } from "@dbaas/proto/identity";
import { hashSecret, newSessionToken } from "./credentials.ts";
import type { Queryable } from "./db/queryable.ts";
import { deleteSessionsExpiredBefore, insertSession } from "./db/sessions.ts";

// Expired sessions are kept this long so their holders are told "token expired"
// rather than "invalid token"; after that they are cleared out.
const EXPIRED_SESSION_RETENTION_MS = 24 * 3600 * 1000;

/** Creates a login token acting through `membershipId`, valid `ttlSeconds` from `now`; only its hash is stored. */
export async function issueSession(db: Queryable, membershipId: string, now: Date, ttlSeconds: number): Promise<Token> {
  const token = newSessionToken();
  const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
  await deleteSessionsExpiredBefore(db, membershipId, new Date(now.getTime() - EXPIRED_SESSION_RETENTION_MS));
  await insertSession(db, { id: newId("tok"), membershipId, tokenHash: hashSecret(token), now, expiresAt });
  return create(TokenSchema, { accessToken: token, tokenType: "Bearer", expiresAt: timestampFromDate(expiresAt) });
}
