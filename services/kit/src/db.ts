import { isTransactionConflict } from "./db-outage.ts";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";

/**
 * A pool whose connections live in the service's own schema: every service
 * owns exactly one schema and never reads another's tables.
 */
export function createPool(databaseUrl: string, schema: string, max = 10): pg.Pool {
  assertIdentifier(schema);
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    options: `-c search_path=${schema}`,
    idleTimeoutMillis: 30_000,
  });
  // An idle client losing its server must not crash the process; the pool replaces it.
  pool.on("error", () => {});
  return pool;
}

function assertIdentifier(name: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`invalid schema name "${name}"`);
}

/**
 * Applies the `NNNN_name.sql` files of `dir` in order, each in its own
 * transaction, recording them in `<schema>.schema_migrations`. An advisory lock
 * makes concurrent starts of several replicas safe. The one way every service
 * migrates: its main calls `await migrate(ctx.pool, config.schema,
 * MIGRATIONS_DIR)`, with `MIGRATIONS_DIR` from its `src/db/schema.ts`, before
 * it serves; tests migrate their schema the same way. Answers the files applied.
 */
export async function migrate(pool: pg.Pool, schema: string, dir: string): Promise<string[]> {
  assertIdentifier(schema);
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query("SELECT pg_advisory_lock(hashtext($1))", [`migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set((await client.query<{ name: string }>(`SELECT name FROM ${schema}.schema_migrations`)).rows.map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await readFile(join(dir, file), "utf8");
      await client.query("BEGIN");
      try {
        await client.query(`SET LOCAL search_path = ${schema}`);
        await client.query(sql);
        await client.query(`INSERT INTO ${schema}.schema_migrations (name) VALUES ($1)`, [file]);
        await client.query("COMMIT");
        applied.push(file);
      } catch (err) {
        await client.query("ROLLBACK");
        throw new Error(`migration ${file} failed: ${(err as Error).message}`);
      }
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock(hashtext($1))", [`migrate:${schema}`]).catch(() => {});
    client.release();
  }
  return applied;
}

/**
 * Runs `fn` with a client of the pool. A connection lost while checked out (a
 * killed backend, a network cut during a slow call made inside `fn`) emits
 * 'error' on the client, which would crash the process without a listener:
 * here `fn`'s own queries fail instead, and a lost client — or one `fn`
 * marked with `discard` — is destroyed rather than returned to the pool.
 */
export async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient, discard: () => void) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (err: Error) => {
    lost = err;
  };
  client.on("error", onError);
  let discarded = false;
  try {
    return await fn(client, () => {
      discarded = true;
    });
  } finally {
    client.removeListener("error", onError);
    client.release(lost ?? discarded);
  }
}

/** Runs `fn` in a transaction on one client; rolls back on any error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return await withClient(pool, async (client, discard) => {
    try {
      await client.query("BEGIN");
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (err) {
      // A client whose transaction cannot be rolled back is not handed to anyone else.
      await client.query("ROLLBACK").catch(discard);
      throw err;
    }
  });
}

/**
 * `withTransaction`, run again (up to `attempts` times in all, a few random milliseconds apart) when PostgreSQL
 * rolled it back for a conflict with another transaction (a deadlock, a serialization failure:
 * `isTransactionConflict`) — as if it had come a moment later. Only for work that is the database's alone: `fn`
 * must not call another service or change anything outside this transaction, since it may run more than once.
 */
export async function withTransactionRetried<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withTransaction(pool, fn);
    } catch (err) {
      if (attempt >= attempts || !isTransactionConflict(err)) throw err;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 45));
    }
  }
}
