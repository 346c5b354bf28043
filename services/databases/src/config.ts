import { envInt, envString, requireEnv, requireSecret } from "@dbaas/kit";
import { DEFAULT_POSTGRES_VERSION } from "@dbaas/catalogue";
import { type DnsConfig, readDnsConfig } from "./dns/config.ts";
import { DEFAULT_GENERATED_PASSWORD_ITERATIONS } from "./scram.ts";

export interface Config {
  port: number;
  databaseUrl: string;
  schema: string;
  internalSecret: string;
  billingUrl: string;
  /** Identity, which mails the organization's owners and admins (storage full and back). */
  identityUrl: string;
  /** Hosts are `<id>.<databaseDomain>`. */
  databaseDomain: string;
  defaultVersion: string;
  /** How long a deleted database's data is kept before the agent purges it. */
  retentionSeconds: number;
  /** An agent not heard from for this long gets no new databases. */
  agentTimeoutSeconds: number;
  /** How long reset-password waits for the agent to confirm the new password. */
  passwordApplyTimeoutMs: number;
  /** How often deleted databases past retention are handed to their agent for purging. */
  purgeSweepIntervalMs: number;
  /** How often the backup schedule looks for databases due a backup. */
  backupScheduleIntervalMs: number;
  /** Running backups per agent the schedule starts at most (manual ones count, and are never held back). */
  backupMaxRunningPerAgent: number;
  /** How often agent samples are rolled up by the hour and purged past retention. */
  samplesMaintenanceIntervalMs: number;
  /** How long a delivered outbox row is kept (for looking into a delivery) before the samples' upkeep deletes it. */
  outboxDeliveredRetentionHours: number;
  /** DNS_PROVIDER and its settings: where the host names are published (dns/). */
  dns: DnsConfig;
  /**
   * TEST_STORAGE_BYTES_PER_GB, tests only (refused with NODE_ENV=production): the bytes that stand for
   * one catalogue GB of a tier's storage, so a test fills a database in seconds (storage.ts).
   */
  testStorageBytesPerGb?: number;
  /** High availability (high-availability.ts): how long an agent's lease on a primary lasts, the margin after it before a standby is promoted. */
  haLeaseSeconds: number;
  haLeaseMarginSeconds: number;
  /** How often the supervisor looks at highly available databases (failovers, switchovers, missing standbys). */
  haSuperviseIntervalMs: number;
  /** How long a planned switchover may wait for its standby to catch up before it is called off. */
  haSwitchoverTimeoutMs: number;
  /** SCRAM iterations of the verifiers of generated passwords (scram.ts): 1 by default, 1 … 100,000. */
  scramIterations: number;
  /** A standby whose agent has not been heard from for this long is retired and replaced on another host. */
  haStandbyReplaceAfterSeconds: number;
}

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  const databaseDomain = envString(env, "DATABASE_DOMAIN", "db.localhost");
  return {
    port: envInt(env, "PORT", 8082),
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    schema: envString(env, "DATABASE_SCHEMA", "databases"),
    internalSecret: requireSecret(env, "INTERNAL_AUTH_SECRET"),
    billingUrl: requireEnv(env, "BILLING_URL"),
    databaseDomain,
    defaultVersion: envString(env, "DEFAULT_POSTGRES_VERSION", DEFAULT_POSTGRES_VERSION),
    retentionSeconds: envInt(env, "DELETED_RETENTION_SECONDS", 7 * 24 * 3600),
    agentTimeoutSeconds: envInt(env, "AGENT_TIMEOUT_SECONDS", 30),
    passwordApplyTimeoutMs: envInt(env, "PASSWORD_APPLY_TIMEOUT_MS", 15_000),
    purgeSweepIntervalMs: envInt(env, "PURGE_SWEEP_INTERVAL_MS", 60_000),
    backupScheduleIntervalMs: envInt(env, "BACKUP_SCHEDULE_INTERVAL_MS", 30_000),
    backupMaxRunningPerAgent: envInt(env, "BACKUP_MAX_RUNNING_PER_AGENT", 2),
    samplesMaintenanceIntervalMs: envInt(env, "SAMPLES_MAINTENANCE_INTERVAL_MS", 300_000),
    outboxDeliveredRetentionHours: envInt(env, "OUTBOX_DELIVERED_RETENTION_HOURS", 72),
    dns: readDnsConfig(env, databaseDomain),
    identityUrl: requireEnv(env, "IDENTITY_URL"),
    ...testStorage(env),
    haLeaseSeconds: envInt(env, "HA_LEASE_SECONDS", 10),
    haLeaseMarginSeconds: envInt(env, "HA_LEASE_MARGIN_SECONDS", 2),
    haSuperviseIntervalMs: envInt(env, "HA_SUPERVISE_INTERVAL_MS", 1000),
    haSwitchoverTimeoutMs: envInt(env, "HA_SWITCHOVER_TIMEOUT_MS", 30_000),
    scramIterations: scramIterations(env),
    haStandbyReplaceAfterSeconds: envInt(env, "HA_STANDBY_REPLACE_AFTER_SECONDS", 120),
  };
}

function scramIterations(env: Record<string, string | undefined>): number {
  const n = envInt(env, "GENERATED_PASSWORD_SCRAM_ITERATIONS", DEFAULT_GENERATED_PASSWORD_ITERATIONS);
  if (!(n >= 1 && n <= 100_000)) throw new Error(`GENERATED_PASSWORD_SCRAM_ITERATIONS must be 1 … 100000, got ${n}`);
  return n;
}

function testStorage(env: Record<string, string | undefined>): { testStorageBytesPerGb?: number } {
  if (!env.TEST_STORAGE_BYTES_PER_GB) return {};
  if (env.NODE_ENV === "production") throw new Error("TEST_STORAGE_BYTES_PER_GB is for tests only; unset it in production");
  return { testStorageBytesPerGb: envInt(env, "TEST_STORAGE_BYTES_PER_GB", 0) };
}
