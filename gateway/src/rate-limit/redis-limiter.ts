import { createReadBatcher, type Clock } from "@dbaas/kit";
import type { RedisLink } from "../redis.ts";
import { decide, windowStart, type Decision, type RateLimiter, type Window } from "./limiter.ts";

interface Ask {
  subject: string;
  windows: readonly Window[];
  nowS: number;
}

/** Requests one script call may count: far more than one event-loop iteration brings. */
const MAX_BATCH = 1_000;

/**
 * Fixed windows shared by every gateway process through Redis: all windows
 * of a subject are checked and counted by one script call (EVALSHA), so
 * concurrent requests on several gateways cannot overshoot a limit. While
 * Redis is unusable the `fallback` (this process's counters) decides instead.
 *
 * The requests of one subject that arrive in the same event-loop iteration
 * (a busy organization's, say) are counted by one call for all of them; each
 * gets the decision it would have got from a call of its own, in arrival
 * order: the first ones while every window has room, the rest refused.
 */
export function createRedisLimiter(link: RedisLink, prefix: string, clock: Clock, fallback: RateLimiter): RateLimiter {
  // The hash tag keeps a subject's windows in one cluster slot, as a multi-key script requires.
  const keysOf = (subject: string, windows: readonly Window[], nowS: number) =>
    windows.map((w) => `${prefix}rl:{${subject}}:${w.seconds}:${windowStart(nowS, w)}`);

  /** One script call for asks of one subject in one window; the decisions in ask order. */
  const count = async (asks: Ask[]): Promise<Decision[]> => {
    const { subject, windows, nowS } = asks[0]!;
    const keys = keysOf(subject, windows, nowS);
    const expireAt = windows.map((w) => windowStart(nowS, w) + w.seconds + 1);
    let reply: number[];
    try {
      reply = await link.run((client) =>
        client.rateLimit(
          keys,
          windows.map((w) => w.limit),
          expireAt,
          asks.length,
        ),
      );
    } catch {
      return await Promise.all(asks.map((a) => fallback.consume(a.subject, a.windows)));
    }
    const [granted, ...before] = reply as [number, ...number[]];
    // The j-th ask sees the counts after the asks before it: its own included when granted.
    return asks.map((_, j) => {
      const allowed = j < granted;
      return decide(
        nowS,
        windows,
        before.map((c) => c + (allowed ? j + 1 : granted)),
        allowed,
      );
    });
  };

  const consume = createReadBatcher<Ask, Decision>(
    async (asks) => {
      // Asks of one subject, with the same windows in the same second, share a call.
      const groups = new Map<string, number[]>();
      asks.forEach((a, i) => {
        const group = `${a.nowS} ${a.windows.map((w) => `${w.seconds}:${w.limit}`).join(",")} ${a.subject}`;
        const members = groups.get(group);
        if (members) members.push(i);
        else groups.set(group, [i]);
      });
      const decisions = new Array<Decision>(asks.length);
      await Promise.all(
        [...groups.values()].map(async (members) => {
          const answers = await count(members.map((i) => asks[i]!));
          members.forEach((i, j) => {
            decisions[i] = answers[j]!;
          });
        }),
      );
      return decisions;
    },
    { maxBatchSize: MAX_BATCH },
  );

  return {
    async consume(subject, windows) {
      if (!link.usable()) return await fallback.consume(subject, windows);
      return await consume({ subject, windows, nowS: Math.floor(clock.now().getTime() / 1000) });
    },
    async peek(subject, windows) {
      const nowS = Math.floor(clock.now().getTime() / 1000);
      if (link.usable()) {
        try {
          const values = await link.run((client) => client.mGet(keysOf(subject, windows, nowS)));
          return decide(
            nowS,
            windows,
            values.map((v) => Number(v ?? 0)),
            true,
          );
        } catch {
          // Marked down by run(); this process's counters answer, as for consume.
        }
      }
      return await fallback.peek!(subject, windows);
    },
  };
}
