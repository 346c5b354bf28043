import { DEFAULT_POSTGRES_VERSION, envInt, envString, requireEnv } from "@dbaas/kit";

export interface Config {
  port: number;
  databaseUrl: string;
  schema: string;
  internalSecret: string;
  billingUrl: string;
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
}

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  return {
    port: envInt(env, "PORT", 8082),
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    schema: envString(env, "DATABASE_SCHEMA", "databases"),
    internalSecret: requireEnv(env, "INTERNAL_AUTH_SECRET"),
    billingUrl: requireEnv(env, "BILLING_URL"),
    databaseDomain: envString(env, "DATABASE_DOMAIN", "db.localhost"),
    defaultVersion: envString(env, "DEFAULT_POSTGRES_VERSION", DEFAULT_POSTGRES_VERSION),
    retentionSeconds: envInt(env, "DELETED_RETENTION_SECONDS", 7 * 24 * 3600),
    agentTimeoutSeconds: envInt(env, "AGENT_TIMEOUT_SECONDS", 30),
    passwordApplyTimeoutMs: envInt(env, "PASSWORD_APPLY_TIMEOUT_MS", 15_000),
    purgeSweepIntervalMs: envInt(env, "PURGE_SWEEP_INTERVAL_MS", 60_000),
    backupScheduleIntervalMs: envInt(env, "BACKUP_SCHEDULE_INTERVAL_MS", 30_000),
    backupMaxRunningPerAgent: envInt(env, "BACKUP_MAX_RUNNING_PER_AGENT", 2),
    samplesMaintenanceIntervalMs: envInt(env, "SAMPLES_MAINTENANCE_INTERVAL_MS", 300_000),
    outboxDeliveredRetentionHours: envInt(env, "OUTBOX_DELIVERED_RETENTION_HOURS", 72),
  };
}
