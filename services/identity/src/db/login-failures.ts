import type { Queryable } from "./queryable.ts";

/** Records a failed attempt for `email` (and forgets those from before `windowStart`); returns its id. */
export async function recordFailure(db: Queryable, email: string, now: Date, windowStart: Date): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `WITH purge AS (DELETE FROM login_failures WHERE failed_at <= $3)
     INSERT INTO login_failures (email, failed_at) VALUES ($1, $2) RETURNING id`,
    [email, now, windowStart],
  );
  return rows[0]!.id;
}

/**
 * When the `n`-th most recent failure for `email` since `windowStart` happened
 * (counting from 1, not counting `except`); undefined when there are fewer.
 */
export async function nthRecentFailure(
  db: Queryable,
  email: string,
  windowStart: Date,
  except: string,
  n: number,
): Promise<Date | undefined> {
  const { rows } = await db.query<{ failed_at: Date }>(
    `SELECT failed_at FROM login_failures WHERE email = $1 AND failed_at > $2 AND id <> $3
     ORDER BY failed_at DESC OFFSET $4 LIMIT 1`,
    [email, windowStart, except, n - 1],
  );
  return rows[0]?.failed_at;
}

export async function deleteFailure(db: Queryable, id: string): Promise<void> {
  await db.query("DELETE FROM login_failures WHERE id = $1", [id]);
}

export async function clearFailures(db: Queryable, email: string): Promise<void> {
  await db.query("DELETE FROM login_failures WHERE email = $1", [email]);
}
