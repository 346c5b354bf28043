import type pg from "pg";

/**
 * Work that one instance of the service does at a time, however many run
 * (the high-availability supervisor, the DNS reconcile): `fn` runs while this
 * process holds the session advisory lock `name` on a connection of its own,
 * and is skipped (undefined) when another session holds it.
 *
 * A session lock lives as long as its connection. When the unlock did not
 * certainly happen (it failed, or `fn` and the unlock both threw) the
 * connection is destroyed rather than returned to the pool: a pooled
 * connection still holding the lock would make every other instance skip the
 * work for as long as the pool kept that connection — for ever, under load.
 */
export async function whileHolding<T>(pool: pg.Pool, name: string, fn: () => Promise<T>): Promise<T | undefined> {
  const conn = await pool.connect();
  let unlocked = true;
  try {
    const { rows } = await conn.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [name]);
    if (!rows[0]!.ok) return undefined;
    unlocked = false;
    try {
      return await fn();
    } finally {
      await conn.query("SELECT pg_advisory_unlock(hashtext($1))", [name]);
      unlocked = true;
    }
  } finally {
    // release(true) ends the connection, and with it the session's lock.
    conn.release(!unlocked);
  }
}
