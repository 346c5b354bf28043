import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type CallOptions, type Client } from "@connectrpc/connect";
import { createInternalClient, createLogger, systemClock, type Clock, type Logger } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { DatabasesService } from "@dbaas/proto/databases";
import { IdentityService } from "@dbaas/proto/identity";
import { InsideService } from "@dbaas/proto/inside";
import type { GatewayConfig } from "./config.ts";
import { createMemoryIdempotencyStore, createRedisIdempotencyStore, type IdempotencyStore } from "./idempotency/store.ts";
import { eitherMaintenance, noMaintenance, watchMaintenance, watchMaintenanceFile, type MaintenanceSwitch } from "./maintenance.ts";
import { createAuthCache, type AuthCache } from "./auth/principal-cache.ts";
import { startRevocationFeed, type RevocationFeedOptions } from "./auth/revocation-feed.ts";
import { createLocalLimiter, type RateLimiter } from "./rate-limit/limiter.ts";
import { createRedisLimiter } from "./rate-limit/redis-limiter.ts";
import { connectRedis } from "./redis.ts";
import { coalesceGetDatabase } from "./upstream/coalesce.ts";

export type RedisHealth = "ok" | "degraded" | "disabled";

/** Everything a request handler may use, built once per process and passed down. */
export interface GatewayContext {
  config: GatewayConfig;
  log: Logger;
  clock: Clock;
  identity: Client<typeof IdentityService>;
  databases: Client<typeof DatabasesService>;
  /** The databases service's InsideService (same upstream): roles, logical databases, config, extensions, logs, queries. */
  inside: Client<typeof InsideService>;
  billing: Client<typeof BillingService>;
  authCache: AuthCache;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
  maintenance: MaintenanceSwitch;
  redisHealth(): RedisHealth;
  /** Releases what the context holds (Redis connections); idempotent. */
  close(): Promise<void>;
}

export interface ContextOverrides {
  log?: Logger;
  clock?: Clock;
  revocationFeed?: RevocationFeedOptions;
}

/**
 * Gives every call a deadline unless the caller set one, so a hung upstream
 * costs the client a 504 rather than a hang. For services that never
 * authenticate end users, UNAUTHENTICATED can only mean they refused the
 * gateway's own internal credential: a misconfiguration, not the client's
 * invalid token, so it is turned into an internal error.
 */
function withUpstreamDefaults<S extends DescService>(
  client: Client<S>,
  upstream: string,
  timeoutMs: number,
  endUserAuth: boolean,
): Client<S> {
  const wrapped: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(client as Record<string, (...args: unknown[]) => unknown>)) {
    wrapped[name] = async (request: unknown, options?: CallOptions) => {
      try {
        return await method.call(client, request, { timeoutMs, ...options });
      } catch (err) {
        if (!endUserAuth && err instanceof ConnectError && err.code === Code.Unauthenticated) {
          throw new ConnectError(`${upstream} refused the gateway's internal credential`, Code.Internal);
        }
        throw err;
      }
    };
  }
  return wrapped as Client<S>;
}

export function createContext(config: GatewayConfig, overrides: ContextOverrides = {}): GatewayContext {
  const log = overrides.log ?? createLogger("gateway");
  const clock = overrides.clock ?? systemClock;
  const client = <S extends DescService>(service: S, url: string, name: string, endUserAuth: boolean) =>
    withUpstreamDefaults(
      createInternalClient(service, url, { secret: config.internalSecret, caller: "gateway" }),
      name,
      config.upstreamTimeoutMs,
      endUserAuth,
    );
  // An idempotency claim must outlive the request it guards, upstream calls included.
  const claimTtlMs = 30_000 + 3 * config.upstreamTimeoutMs;
  const localLimiter = createLocalLimiter(clock);
  const localIdempotency = createMemoryIdempotencyStore(clock, claimTtlMs);
  const authCache = createAuthCache(clock);
  // The revocation stream lives as long as the process: it gets no per-call deadline.
  const feed = startRevocationFeed(
    createInternalClient(IdentityService, config.identityUrl, { secret: config.internalSecret, caller: "gateway" }),
    authCache,
    log,
    overrides.revocationFeed,
  );
  const base = {
    config,
    log,
    clock,
    identity: client(IdentityService, config.identityUrl, "identity", true),
    databases: coalesceGetDatabase(client(DatabasesService, config.databasesUrl, "databases", false)),
    inside: client(InsideService, config.databasesUrl, "databases", false),
    billing: client(BillingService, config.billingUrl, "billing", false),
    authCache,
  };
  const fileSwitch = config.maintenanceFile ? watchMaintenanceFile(config.maintenanceFile, log) : undefined;
  if (config.redisUrl === undefined) {
    const maintenance = fileSwitch ?? noMaintenance;
    return {
      ...base,
      limiter: localLimiter,
      idempotency: localIdempotency,
      maintenance,
      redisHealth: () => "disabled",
      close: async () => {
        feed.close();
        maintenance.close();
      },
    };
  }
  const redis = connectRedis(config.redisUrl, log);
  const redisSwitch = watchMaintenance(redis, config.redisPrefix, log);
  const maintenance = fileSwitch ? eitherMaintenance(redisSwitch, fileSwitch) : redisSwitch;
  return {
    ...base,
    limiter: createRedisLimiter(redis, config.redisPrefix, clock, localLimiter),
    idempotency: createRedisIdempotencyStore(redis, config.redisPrefix, claimTtlMs, localIdempotency),
    maintenance,
    redisHealth: () => (redis.usable() ? "ok" : "degraded"),
    close: async () => {
      feed.close();
      maintenance.close();
      await redis.close();
    },
  };
}
