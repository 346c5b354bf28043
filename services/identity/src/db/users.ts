import type { Queryable } from "./queryable.ts";

/** What a password check needs of an account. */
export interface AccountRow {
  id: string;
  password_hash: string;
}

/** E-mail addresses are unique regardless of case (users_email_key). */
export async function emailRegistered(db: Queryable, email: string): Promise<boolean> {
  return Boolean((await db.query("SELECT 1 FROM users WHERE lower(email) = lower($1)", [email])).rowCount);
}

export async function findAccount(db: Queryable, email: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>("SELECT id, password_hash FROM users WHERE lower(email) = lower($1)", [email]);
  return rows[0];
}

export async function insertUser(
  db: Queryable,
  user: { id: string; email: string; name: string; passwordHash: string; now: Date },
): Promise<void> {
  await db.query("INSERT INTO users (id, email, name, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)", [
    user.id,
    user.email,
    user.name,
    user.passwordHash,
    user.now,
  ]);
}

export async function setPasswordHash(db: Queryable, id: string, passwordHash: string, now: Date): Promise<void> {
  await db.query("UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1", [id, passwordHash, now]);
}

export async function findUserContact(db: Queryable, id: string): Promise<{ name: string; email: string } | undefined> {
  const { rows } = await db.query<{ name: string; email: string }>("SELECT name, email FROM users WHERE id = $1", [id]);
  return rows[0];
}
