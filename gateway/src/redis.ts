import { createClient, defineScript } from "redis";
import type { Logger } from "@dbaas/kit";

/**
 * Counts `n` requests of one subject in every window, atomically and in one
 * round trip: as many of them as every window still has room for (the
 * grant), each counted in all windows, the rest in none (a refused request
 * does not eat into the day's budget). Exactly what n calls one after another
 * would have done, with n = 1 the single request.
 * KEYS: one counter per window. ARGV: the limits, then each counter's expiry
 * (Unix s), then n. Reply: {granted, count_1, ..., count_k} with each
 * window's count before this call.
 */
const RATE_LIMIT = defineScript({
  SCRIPT: `
local k = #KEYS
local granted = tonumber(ARGV[2 * k + 1])
local counts = {}
for i = 1, k do
  counts[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  local room = tonumber(ARGV[i]) - counts[i]
  if room < granted then granted = room end
end
if granted < 0 then granted = 0 end
if granted > 0 then
  for i = 1, k do
    if redis.call('INCRBY', KEYS[i], granted) == granted then redis.call('EXPIREAT', KEYS[i], ARGV[k + i]) end
  end
end
table.insert(counts, 1, granted)
return counts`,
  parseCommand(parser, keys: string[], limits: number[], expireAt: number[], n: number) {
    // The number of keys varies (enterprise has no day window): pushKeysLength sends the count, then the keys.
    parser.pushKeysLength(keys);
    parser.push(...limits.map(String), ...expireAt.map(String), String(n));
  },
  transformReply: (reply: unknown) => reply as number[],
});

/** Claims KEYS[1] with ARGV[1] for ARGV[2] ms unless it exists; replies with the existing value, or nil when claimed. */
const CLAIM = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return redis.call('GET', KEYS[1])`,
  parseCommand(parser, key: string, value: string, ttlMs: number) {
    parser.pushKey(key);
    parser.push(value, String(ttlMs));
  },
  transformReply: (reply: unknown) => reply as string | null,
});

/**
 * Replaces KEYS[1] only while it still starts with ARGV[1] (the claim of the
 * caller): with ARGV[2] for ARGV[3] ms, or deletes it when ARGV[2] is empty.
 * A claim that expired and was taken over by another request stays theirs.
 */
const SETTLE = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`,
  parseCommand(parser, key: string, claim: string, value: string, ttlMs: number) {
    parser.pushKey(key);
    parser.push(claim, value, String(ttlMs));
  },
  transformReply: (reply: unknown) => reply as number,
});

/** Extends KEYS[1] to ARGV[2] ms only while it still starts with ARGV[1] (the caller's claim). */
const RENEW = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])`,
  parseCommand(parser, key: string, claim: string, ttlMs: number) {
    parser.pushKey(key);
    parser.push(claim, String(ttlMs));
  },
  transformReply: (reply: unknown) => reply as number,
});

/**
 * A client with the gateway's scripts. `reconnect: false` is for one-shot
 * tools, which should fail rather than wait for Redis to come back.
 */
export function createRedisClient(url: string, reconnect = true) {
  return createClient({
    url,
    // Fail fast while disconnected instead of queueing: callers fall back to local state.
    disableOfflineQueue: true,
    socket: {
      connectTimeout: 1_000,
      reconnectStrategy: reconnect ? (retries: number) => Math.min(100 * 2 ** retries, 3_000) : false,
    },
    scripts: { rateLimit: RATE_LIMIT, claim: CLAIM, settle: SETTLE, renew: RENEW },
  });
}

export type GatewayRedisClient = ReturnType<typeof createRedisClient>;

/** How long a command may go unanswered before the caller falls back to local state. */
export const COMMAND_TIMEOUT_MS = 500;

/**
 * Fails `command` if Redis has not answered within COMMAND_TIMEOUT_MS, with
 * a plain timer cleared on the answer. (node-redis's own per-command timeout
 * is an AbortSignal.timeout that is never cleared: each one later fires and
 * builds a DOMException, a measurable share of the gateway's CPU at
 * thousands of requests per second.) A late answer is dropped.
 */
function withinDeadline<T>(command: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis did not answer within ${COMMAND_TIMEOUT_MS} ms`)), COMMAND_TIMEOUT_MS);
    command.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** A Redis connection that may be down at any time; `usable()` says whether to try it. */
export interface RedisLink {
  client: GatewayRedisClient;
  /** Runs a command with the gateway's deadline; a failure marks the link down for a moment. */
  run<T>(command: (client: GatewayRedisClient) => Promise<T>): Promise<T>;
  usable(): boolean;
  close(): Promise<void>;
}

/**
 * Connects in the background and keeps reconnecting: the gateway starts and
 * serves without Redis. Outages are logged once when they begin and once when
 * they end, not on every reconnection attempt.
 */
export function connectRedis(url: string, log: Logger): RedisLink {
  const client = createRedisClient(url);
  let down = false;
  let lastFailure = 0;
  const markDown = (err: unknown) => {
    lastFailure = Date.now();
    if (down) return;
    down = true;
    log.warn("redis unavailable: rate limits and idempotency fall back to this process", { error: err });
  };
  client.on("error", markDown);
  client.connect().catch(markDown);
  return {
    client,
    async run(command) {
      try {
        return await withinDeadline(command(client));
      } catch (err) {
        markDown(err);
        throw err;
      }
    },
    usable() {
      // A command that just failed on a "ready" socket (a timeout, say) sends the next ones local for a moment.
      if (!client.isReady || Date.now() - lastFailure < 1_000) return false;
      if (down) {
        down = false;
        log.info("redis available again");
      }
      return true;
    },
    close: async () => {
      if (client.isOpen) client.destroy();
    },
  };
}
