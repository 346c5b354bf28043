import type { Clock } from "@dbaas/kit";
import type { RedisLink } from "../redis.ts";
import { decide, windowStart, type RateLimiter } from "./limiter.ts";

/**
 * Fixed windows shared by every gateway process through Redis: both windows
 * are checked and counted by one script call (EVALSHA), so concurrent
 * requests on several gateways cannot overshoot a limit. While Redis is
 * unusable the `fallback` (this process's counters) decides instead.
 */
export function createRedisLimiter(link: RedisLink, prefix: string, clock: Clock, fallback: RateLimiter): RateLimiter {
  return {
    async consume(subject, windows) {
      if (!link.usable()) return await fallback.consume(subject, windows);
      const nowS = Math.floor(clock.now().getTime() / 1000);
      // The hash tag keeps a subject's windows in one cluster slot, as a multi-key script requires.
      const keys = windows.map((w) => `${prefix}rl:{${subject}}:${w.seconds}:${windowStart(nowS, w)}`);
      const expireAt = windows.map((w) => windowStart(nowS, w) + w.seconds + 1);
      let reply: number[];
      try {
        reply = await link.run((client) =>
          client.rateLimit(
            keys,
            windows.map((w) => w.limit),
            expireAt,
          ),
        );
      } catch {
        return await fallback.consume(subject, windows);
      }
      const [allowed, ...counts] = reply;
      return decide(nowS, windows, counts, allowed === 1);
    },
  };
}
