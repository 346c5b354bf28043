import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import { createInternalClient, createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import { IdentityService } from "@dbaas/proto/identity";
import type { Config } from "./config.ts";
import type { PaymentProcessor } from "./processor/processor.ts";
import { createStripeProcessor } from "./processor/stripe.ts";
import { createTestProcessor } from "./processor/test-processor.ts";

/** What handlers depend on, built once per process; tests build their own with a manual clock. */
export interface AppContext {
  pool: pg.Pool;
  clock: Clock;
  log: Logger;
  processor: PaymentProcessor;
  /** Where alert notices go; unset without IDENTITY_URL. */
  identity?: Client<typeof IdentityService>;
  /** The longest a storage sample's size is held for when the next one is late. */
  storageMaxGapMs: number;
  /** How long usage samples are kept; older ones are ignored at ingest. */
  usageSampleRetentionDays: number;
}

/** The context of `config`; `overrides` swap dependencies (a test's clock, pool, processor or identity client). */
export function createContext(config: Config, overrides: Partial<AppContext> = {}): AppContext {
  const clock = overrides.clock ?? systemClock;
  const p = config.processor;
  return {
    pool: overrides.pool ?? createPool(config.databaseUrl, config.schema),
    clock,
    log: overrides.log ?? createLogger("billing"),
    processor: overrides.processor ?? (p.kind === "stripe" ? createStripeProcessor(p) : createTestProcessor(clock)),
    identity:
      overrides.identity ??
      (config.identityUrl === undefined
        ? undefined
        : createInternalClient(IdentityService, config.identityUrl, { secret: config.internalSecret, caller: "billing" })),
    storageMaxGapMs: overrides.storageMaxGapMs ?? config.storageMaxGapMs,
    usageSampleRetentionDays: overrides.usageSampleRetentionDays ?? config.usageSampleRetentionDays,
  };
}
