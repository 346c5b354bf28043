import { ConfigError, envInt, envString, requireEnv, requireSecret } from "@dbaas/kit";
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
  /** Identity's internal address, where alert notices go; without it alerts are stored but never checked. */
  identityUrl: string | undefined;
  /** How often alerts are checked against month-to-date totals and their notices relayed. */
  alertCheckIntervalMs: number;
  /** The longest a storage sample's size is held for when the next sample is late (see metering/accrual.ts). */
  storageMaxGapMs: number;
  /** How long usage samples are kept (and how late one may arrive): older ones are purged, and ignored at ingest. */
  usageSampleRetentionDays: number;
}

type Env = Record<string, string | undefined>;

function checkUrl(name: string, value: string): string {
  try {
    new URL(value);
  } catch {
    throw new ConfigError(`environment variable ${name} must be a URL, got "${value}"`);
  }
  return value;
}

function readProcessor(env: Env): ProcessorConfig {
  const kind = envString(env, "PAYMENT_PROCESSOR", "test");
  if (kind === "test") return { kind };
  if (kind !== "stripe") throw new ConfigError(`PAYMENT_PROCESSOR must be test or stripe, got "${kind}"`);
  const apiBase = checkUrl("STRIPE_API_BASE", envString(env, "STRIPE_API_BASE", STRIPE_API_BASE));
  // Stripe's SDK takes a host, a port and a protocol; the path is its own.
  const path = new URL(apiBase).pathname;
  if (path.replace(/\/+$/, "") !== "/v1") throw new ConfigError(`STRIPE_API_BASE must end in /v1, as Stripe's does, got "${path}"`);
  return { kind, secretKey: requireSecret(env, "STRIPE_SECRET_KEY"), apiBase };
}

function readInterval(env: Env, name: string, fallback = 60_000): number {
  const ms = envInt(env, name, fallback);
  if (ms <= 0) throw new ConfigError(`${name} must be a positive number of milliseconds, got ${ms}`);
  return ms;
}

function readRetentionDays(env: Env): number {
  const days = envInt(env, "USAGE_SAMPLE_RETENTION_DAYS", 40);
  if (days <= 0) throw new ConfigError(`USAGE_SAMPLE_RETENTION_DAYS must be a positive number of days, got ${days}`);
  return days;
}

/** Reads the billing service's settings, failing fast on a missing one. */
export function readConfig(env: Env = process.env): Config {
  const identityUrl = envString(env, "IDENTITY_URL", "");
  return {
    port: envInt(env, "PORT", 8083),
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    schema: envString(env, "DATABASE_SCHEMA", "billing"),
    internalSecret: requireSecret(env, "INTERNAL_AUTH_SECRET"),
    processor: readProcessor(env),
    invoiceCloseIntervalMs: readInterval(env, "INVOICE_CLOSE_INTERVAL_MS"),
    identityUrl: identityUrl === "" ? undefined : checkUrl("IDENTITY_URL", identityUrl),
    alertCheckIntervalMs: readInterval(env, "ALERT_CHECK_INTERVAL_MS"),
    // Twice the agents' default sampling interval (30 s): one late or lost sample is bridged, an outage is not.
    storageMaxGapMs: readInterval(env, "STORAGE_SAMPLE_MAX_GAP_MS", 60_000),
    usageSampleRetentionDays: readRetentionDays(env),
  };
}
