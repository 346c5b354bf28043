import { ConfigError, envInt, envString, requireEnv } from "@dbaas/kit";
import { STRIPE_API_BASE } from "./processor/stripe.ts";

/** Which payment processor payment methods go to. The secret key lives here only; nothing logs the config. */
export type ProcessorConfig = { kind: "test" } | { kind: "stripe"; secretKey: string; apiBase: string };

export interface Config {
  port: number;
  databaseUrl: string;
  /** The PostgreSQL schema this service owns; nothing else reads it. */
  schema: string;
  internalSecret: string;
  processor: ProcessorConfig;
  /** How often ended months are closed and due invoices charged (also once at start-up). */
  invoiceCloseIntervalMs: number;
}

type Env = Record<string, string | undefined>;

function readProcessor(env: Env): ProcessorConfig {
  const kind = envString(env, "PAYMENT_PROCESSOR", "test");
  if (kind === "test") return { kind };
  if (kind !== "stripe") throw new ConfigError(`PAYMENT_PROCESSOR must be test or stripe, got "${kind}"`);
  const apiBase = envString(env, "STRIPE_API_BASE", STRIPE_API_BASE);
  try {
    new URL(apiBase);
  } catch {
    throw new ConfigError(`environment variable STRIPE_API_BASE must be a URL, got "${apiBase}"`);
  }
  return { kind, secretKey: requireEnv(env, "STRIPE_SECRET_KEY"), apiBase };
}

function readInterval(env: Env): number {
  const ms = envInt(env, "INVOICE_CLOSE_INTERVAL_MS", 60_000);
  if (ms <= 0) throw new ConfigError(`INVOICE_CLOSE_INTERVAL_MS must be a positive number of milliseconds, got ${ms}`);
  return ms;
}

/** Reads the billing service's settings, failing fast on a missing one. */
export function readConfig(env: Env = process.env): Config {
  return {
    port: envInt(env, "PORT", 8083),
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    schema: envString(env, "DATABASE_SCHEMA", "billing"),
    internalSecret: requireEnv(env, "INTERNAL_AUTH_SECRET"),
    processor: readProcessor(env),
    invoiceCloseIntervalMs: readInterval(env),
  };
}
