import { envInt, envString, requireEnv } from "@dbaas/kit";

export interface Config {
  port: number;
  databaseUrl: string;
  /** The PostgreSQL schema this service owns; nothing else reads it. */
  schema: string;
  internalSecret: string;
}

/** Reads the billing service's settings, failing fast on a missing one. */
export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  return {
    port: envInt(env, "PORT", 8083),
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    schema: envString(env, "DATABASE_SCHEMA", "billing"),
    internalSecret: requireEnv(env, "INTERNAL_AUTH_SECRET"),
  };
}
