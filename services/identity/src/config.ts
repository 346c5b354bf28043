import { ConfigError, envInt, envString, requireEnv, requireSecret } from "@dbaas/kit";
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
  /** Unset: mails are printed to the log instead of sent (local stack). */
  smtpUrl: string | undefined;
  /** From: of every mail. */
  mailFrom: string;
  /** Where the public web front lives: invitation links point there. */
  publicBaseUrl: string;
  /** The databases service, asked whether an organization still has databases before deleting it. */
  databasesUrl: string | undefined;
  /** The billing service, asked whether an organization has a payment method before it moves to a paid plan. */
  billingUrl: string | undefined;
  /** How often the mail relay looks for due mails when nothing nudges it. */
  mailPollMs: number;
}

// Below 2^14 scrypt stops being a meaningful obstacle; above 2^20 one login needs a GiB.
const MIN_SCRYPT_N = 2 ** 14;
const MAX_SCRYPT_N = 2 ** 20;

function url(env: Record<string, string | undefined>, name: string, fallback?: string): string | undefined {
  const value = env[name] === undefined || env[name] === "" ? fallback : env[name];
  if (value === undefined) return undefined;
  try {
    return new URL(value).toString().replace(/\/$/, "");
  } catch {
    throw new ConfigError(`environment variable ${name} must be a URL, got "${value}"`);
  }
}

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  const port = envInt(env, "PORT", 8081);
  if (port < 0 || port > 65535) throw new ConfigError(`PORT must be between 0 and 65535, got ${port}`);
  const tokenTtlSeconds = envInt(env, "TOKEN_TTL_SECONDS", 3600);
  if (tokenTtlSeconds < 1) throw new ConfigError(`TOKEN_TTL_SECONDS must be positive, got ${tokenTtlSeconds}`);
  const scryptN = envInt(env, "PASSWORD_SCRYPT_N", DEFAULT_SCRYPT_N);
  if (scryptN < MIN_SCRYPT_N || scryptN > MAX_SCRYPT_N || (scryptN & (scryptN - 1)) !== 0) {
    throw new ConfigError(`PASSWORD_SCRYPT_N must be a power of two from 2^14 to 2^20, got ${scryptN}`);
  }
  const smtpUrl = url(env, "SMTP_URL");
  if (smtpUrl !== undefined && !/^smtps?:$/.test(new URL(smtpUrl).protocol)) {
    throw new ConfigError(`SMTP_URL must start with smtp:// or smtps://, got "${env.SMTP_URL}"`);
  }
  const mailPollMs = envInt(env, "MAIL_POLL_MS", 1000);
  if (mailPollMs < 10) throw new ConfigError(`MAIL_POLL_MS must be at least 10, got ${mailPollMs}`);
  return {
    port,
    databaseUrl: requireEnv(env, "DATABASE_URL"),
    databaseSchema: envString(env, "DATABASE_SCHEMA", "identity"),
    internalSecret: requireSecret(env, "INTERNAL_AUTH_SECRET"),
    tokenTtlSeconds,
    scryptN,
    smtpUrl,
    mailFrom: envString(env, "MAIL_FROM", "dbaas <no-reply@dbaas.localhost>"),
    publicBaseUrl: url(env, "PUBLIC_BASE_URL", "http://127.0.0.1:8080")!,
    databasesUrl: url(env, "DATABASES_URL"),
    billingUrl: url(env, "BILLING_URL"),
    mailPollMs,
  };
}
