import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import { BillingService } from "@dbaas/proto/billing";
import { createInternalClient, createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import { createChangeFeed, type ChangeFeed } from "./change-feed.ts";
import type { Config } from "./config.ts";

/** What handlers and background work depend on, built once per process and passed down. */
export interface AppContext {
  cfg: Config;
  pool: pg.Pool;
  feed: ChangeFeed;
  billing: Client<typeof BillingService>;
  /**
   * "Now" wherever time decides something: reset-password's deadline, the
   * retention window of deleted databases, when an agent counts as silent.
   * Timestamps that only record when a row changed are PostgreSQL's `now()`.
   */
  clock: Clock;
  log: Logger;
}

/** The context of `config`; `overrides` swap dependencies (a test's clock, billing or logger). */
export async function createContext(config: Config, overrides: Partial<AppContext> = {}): Promise<AppContext> {
  const log = overrides.log ?? createLogger("databases");
  return {
    cfg: config,
    pool: overrides.pool ?? createPool(config.databaseUrl, config.schema),
    log,
    clock: overrides.clock ?? systemClock,
    // Connects (LISTEN) at once: hence async.
    feed: overrides.feed ?? (await createChangeFeed(config.databaseUrl, log)),
    billing:
      overrides.billing ?? createInternalClient(BillingService, config.billingUrl, { secret: config.internalSecret, caller: "databases" }),
  };
}
