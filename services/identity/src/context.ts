import { fileURLToPath } from "node:url";
import type pg from "pg";
import { createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import type { Config } from "./config.ts";
import { createPasswordHasher, type PasswordHasher } from "./passwords.ts";

export const MIGRATIONS_DIR = fileURLToPath(new URL("./db/migrations", import.meta.url));

/** Everything handlers depend on, built once at start-up and passed down. */
export interface AppContext {
  pool: pg.Pool;
  clock: Clock;
  log: Logger;
  passwords: PasswordHasher;
  tokenTtlSeconds: number;
}

export function createContext(
  config: Config,
  log: Logger,
  overrides: Partial<Pick<AppContext, "pool" | "clock">> = {},
): AppContext {
  return {
    pool: overrides.pool ?? createPool(config.databaseUrl, config.databaseSchema),
    clock: overrides.clock ?? systemClock,
    log,
    passwords: createPasswordHasher(config.scryptN),
    tokenTtlSeconds: config.tokenTtlSeconds,
  };
}
