import { fileURLToPath } from "node:url";
import type pg from "pg";
import { migrate } from "@dbaas/kit";

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations", import.meta.url));

/** Brings the service's schema up to date (safe to run from several replicas at once). */
export function migrateBilling(pool: pg.Pool, schema: string): Promise<string[]> {
  return migrate(pool, schema, MIGRATIONS_DIR);
}
