import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import { BillingService } from "@dbaas/proto/billing";
import { createInternalClient, createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import { createChangeFeed, type ChangeFeed } from "./change-feed.ts";
import type { Config } from "./config.ts";

export interface AppContext {
  cfg: Config;
  pool: pg.Pool;
  feed: ChangeFeed;
  billing: Client<typeof BillingService>;
  clock: Clock;
  log: Logger;
}

export async function createContext(cfg: Config, overrides: Partial<AppContext> = {}): Promise<AppContext> {
  const log = overrides.log ?? createLogger("databases");
  const pool = overrides.pool ?? createPool(cfg.databaseUrl, cfg.schema);
  return {
    cfg,
    pool,
    log,
    clock: overrides.clock ?? systemClock,
    feed: overrides.feed ?? (await createChangeFeed(cfg.databaseUrl, log)),
    billing:
      overrides.billing ??
      createInternalClient(BillingService, cfg.billingUrl, { secret: cfg.internalSecret, caller: "databases" }),
  };
}
