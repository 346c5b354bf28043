import type pg from "pg";
import { createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
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
}

export function createContext(config: Config): AppContext {
  const clock = systemClock;
  const p = config.processor;
  return {
    pool: createPool(config.databaseUrl, config.schema),
    clock,
    log: createLogger("billing"),
    processor: p.kind === "stripe" ? createStripeProcessor(p) : createTestProcessor(clock),
  };
}
