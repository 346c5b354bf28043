import type pg from "pg";
import { createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import type { Config } from "./config.ts";

/** What handlers depend on, built once per process; tests build their own with a manual clock. */
export interface AppContext {
  pool: pg.Pool;
  clock: Clock;
  log: Logger;
}

export function createContext(config: Config): AppContext {
  return {
    pool: createPool(config.databaseUrl, config.schema),
    clock: systemClock,
    log: createLogger("billing"),
  };
}
