import { ConfigError, envInt, envString, requireEnv } from "@dbaas/kit";
import { DEFAULT_SCRYPT_N } from "./passwords.ts";

export interface Config {
  port: number;
  databaseUrl: string;
  databaseSchema: string;
  internalSecret: string;
  /** Lifetime of a login token. */
  tokenTtlSeconds: number;
  /** scrypt cost for new password hashes (a power of two). */
  scryptN: number;
}

// Below 2^14 scrypt stops being a meaningful obstacle; above 2^20 one login needs a GiB.
const MIN_SCRYPT_N = 2 ** 14;
const MAX_SCRYPT_N = 2 ** 20;

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  const port = envInt(env, "PORT", 8081);
  if (port < 0 || port > 65535) throw new ConfigError(`PORT must be between 0 and 65535, got ${port}`);
  const tokenTtlSeconds = envInt(env, "TOKEN_TTL_SECONDS", 3600);
  if (tokenTtlSeconds < 1) throw new ConfigError(`TOKEN_TTL_SECONDS must be positive, got ${tokenTtlSeconds}`);
  const scryptN = envInt(env, "PASSWORD_SCRYPT_N", DEFAULT_SCRYPT_N);
  if (scryptN < MIN_SCRYPT_N || scryptN > MAX_SCRYPT_N || (scryptN & (scryptN - 1)) !== 0) {
    throw new ConfigError(`PASSWORD_SCRYPT_N must be a power of two from 2^14 to 2^20, got ${scryptN}`);
  }
  return {
    port,
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    databaseSchema: envString(env, "DATABASE_SCHEMA", "identity"),
    internalSecret: requireEnv(env, "INTERNAL_AUTH_SECRET"),
    tokenTtlSeconds,
    scryptN,
  };
}
