import { ConfigError, envInt, envList, envString, logs, requireEnv, requireSecret } from "@dbaas/kit";

export interface GatewayConfig {
  port: number;
  host: string;
  identityUrl: string;
  databasesUrl: string;
  billingUrl: string;
  internalSecret: string;
  /** Unset: rate limits live in this process only. */
  redisUrl: string | undefined;
  /** Prefix of every Redis key this gateway writes; lets deployments (and tests) share one Redis. */
  redisPrefix: string;
  /** A file whose presence switches maintenance mode on (the local stack's switch without Redis); unset: none. */
  maintenanceFile: string | undefined;
  publicBaseUrl: string;
  corsOrigins: string[];
  /** Deadline of one call to an upstream service. */
  upstreamTimeoutMs: number;
  /** Deadline of a whole public request: answered 504/503 by then (middleware/deadline.ts). */
  requestTimeoutMs: number;
  /** Express "trust proxy": how many proxy hops may set X-Forwarded-For (0: use the socket address). */
  trustProxyHops: number;
  /** Limits for callers without a credential (signup, token, unknown routes), per client IP. */
  ipLimitPerMinute: number;
  ipLimitPerDay: number;
  /** One info line per request; off when LOG_LEVEL (warn, error, silent) mutes info lines anyway. */
  requestLog: boolean;
}

type Env = Record<string, string | undefined>;

function positive(name: string, value: number, min = 1): number {
  if (value < min) throw new ConfigError(`environment variable ${name} must be at least ${min}, got ${value}`);
  return value;
}

function url(name: string, value: string): string {
  try {
    return new URL(value).toString().replace(/\/$/, "");
  } catch {
    throw new ConfigError(`environment variable ${name} must be a URL, got "${value}"`);
  }
}

/** Reads the gateway's settings; throws ConfigError naming the first bad variable. */
export function readConfig(env: Env = process.env): GatewayConfig {
  const port = envInt(env, "PORT", 8080);
  if (port < 0 || port > 65535) throw new ConfigError(`environment variable PORT must be a port number, got ${port}`);
  const host = envString(env, "HOST", "127.0.0.1");
  return {
    port,
    host,
    identityUrl: url("IDENTITY_URL", requireEnv(env, "IDENTITY_URL")),
    databasesUrl: url("DATABASES_URL", requireEnv(env, "DATABASES_URL")),
    billingUrl: url("BILLING_URL", requireEnv(env, "BILLING_URL")),
    internalSecret: requireSecret(env, "INTERNAL_AUTH_SECRET"),
    redisUrl: env.REDIS_URL === undefined || env.REDIS_URL === "" ? undefined : url("REDIS_URL", env.REDIS_URL),
    redisPrefix: envString(env, "REDIS_KEY_PREFIX", "gw:"),
    maintenanceFile: env.MAINTENANCE_FILE || undefined,
    publicBaseUrl: url("PUBLIC_BASE_URL", envString(env, "PUBLIC_BASE_URL", `http://${host}:${port}`)),
    corsOrigins: envList(env, "CORS_ORIGINS", []),
    upstreamTimeoutMs: positive("UPSTREAM_TIMEOUT_MS", envInt(env, "UPSTREAM_TIMEOUT_MS", 10_000)),
    requestTimeoutMs: positive("REQUEST_TIMEOUT_MS", envInt(env, "REQUEST_TIMEOUT_MS", 10_000)),
    trustProxyHops: positive("TRUST_PROXY_HOPS", envInt(env, "TRUST_PROXY_HOPS", 0), 0),
    ipLimitPerMinute: positive("IP_RATE_LIMIT_PER_MINUTE", envInt(env, "IP_RATE_LIMIT_PER_MINUTE", 60)),
    ipLimitPerDay: positive("IP_RATE_LIMIT_PER_DAY", envInt(env, "IP_RATE_LIMIT_PER_DAY", 1000)),
    requestLog: logs("info", env),
  };
}
