import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import { BillingService } from "@dbaas/proto/billing";
import { IdentityService } from "@dbaas/proto/identity";
import { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { createInternalClient, createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import { createChangeFeed, type ChangeFeed } from "./change-feed.ts";
import type { Config } from "./config.ts";
import { createHostRecords, type HostRecords } from "./dns/records.ts";

/** What handlers and background work depend on, built once per process and passed down. */
export interface AppContext {
  cfg: Config;
  pool: pg.Pool;
  feed: ChangeFeed;
  billing: Client<typeof BillingService>;
  /** Mails the organization's owners and admins (storage.ts). */
  identity: Client<typeof IdentityService>;
  /**
   * "Now" wherever time decides something: reset-password's deadline, the
   * retention window of deleted databases, when an agent counts as silent.
   * Timestamps that only record when a row changed are PostgreSQL's `now()`.
   */
  clock: Clock;
  log: Logger;
  /** The databases' host names in DNS (DNS_PROVIDER=rfc2136); undefined with `none`. */
  dns?: HostRecords;
  /** The InstanceAdminService of the agent at a control URL (one client per URL, kept): the way inside its servers. */
  instanceAdmin: (controlUrl: string) => Client<typeof InstanceAdminService>;
}

/** One internal client per agent control URL, made when first asked for. */
function agentClients(config: Config): (controlUrl: string) => Client<typeof InstanceAdminService> {
  const clients = new Map<string, Client<typeof InstanceAdminService>>();
  return (url) => {
    let c = clients.get(url);
    if (!c) {
      c = createInternalClient(InstanceAdminService, url, { secret: config.internalSecret, caller: "databases" });
      clients.set(url, c);
    }
    return c;
  };
}

/** The context of `config`; `overrides` swap dependencies (a test's clock, billing or logger). */
export async function createContext(config: Config, overrides: Partial<AppContext> = {}): Promise<AppContext> {
  const log = overrides.log ?? createLogger("databases");
  return {
    cfg: config,
    pool: overrides.pool ?? createPool(config.databaseUrl, config.schema),
    log,
    clock: overrides.clock ?? systemClock,
    dns: "dns" in overrides ? overrides.dns : createHostRecords(config),
    // Connects (LISTEN) at once: hence async.
    feed: overrides.feed ?? (await createChangeFeed(config.databaseUrl, log)),
    billing:
      overrides.billing ?? createInternalClient(BillingService, config.billingUrl, { secret: config.internalSecret, caller: "databases" }),
    identity:
      overrides.identity ??
      createInternalClient(IdentityService, config.identityUrl, { secret: config.internalSecret, caller: "databases" }),
    instanceAdmin: overrides.instanceAdmin ?? agentClients(config),
  };
}
