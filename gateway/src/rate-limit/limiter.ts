import type { Clock } from "@dbaas/kit";

/** One fixed window: at most `limit` requests per `seconds`, aligned to the Unix epoch (days start at 00:00 UTC). */
export interface Window {
  limit: number;
  seconds: number;
}

/** The outcome of one request against all of a subject's windows, as reported in the X-RateLimit-* headers. */
export interface Decision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix time, seconds, when the reported window resets. */
  reset: number;
  /** Seconds until the request would be allowed again (0 when allowed). */
  retryAfter: number;
}

export interface RateLimiter {
  /** Counts one request of `subject` against every window, unless one of them is already exhausted. */
  consume(subject: string, windows: readonly Window[]): Promise<Decision>;
  /** The subject's windows as they stand, counting nothing: the headers of a request that must not be charged. */
  peek?(subject: string, windows: readonly Window[]): Promise<Decision>;
}

const MINUTE = 60;
const DAY = 86_400;

const FREE_WINDOWS: readonly Window[] = [
  { limit: 60, seconds: MINUTE },
  { limit: 1_000, seconds: DAY },
];

/** docs/product.md, Rate limits. A plan the gateway does not know gets the free plan's limits. */
const PLAN_WINDOWS: Record<string, readonly Window[]> = {
  free: FREE_WINDOWS,
  pro: [
    { limit: 1_000, seconds: MINUTE },
    { limit: 100_000, seconds: DAY },
  ],
  enterprise: [{ limit: 10_000, seconds: MINUTE }],
  // Our own tooling (benchmarks, synthetic checks): counted like everyone, never refused in practice.
  // Not a plan customers can choose; only support sets it.
  internal: [{ limit: 1_000_000_000, seconds: MINUTE }],
};

export function planWindows(plan: string): readonly Window[] {
  return PLAN_WINDOWS[plan] ?? FREE_WINDOWS;
}

export function ipWindows(perMinute: number, perDay: number): readonly Window[] {
  return [
    { limit: perMinute, seconds: MINUTE },
    { limit: perDay, seconds: DAY },
  ];
}

export const windowStart = (nowS: number, w: Window) => Math.floor(nowS / w.seconds) * w.seconds;

/**
 * Builds the decision from each window's count after the request (or, when
 * refused, before it: a refused request is not counted). The headers describe
 * the window closest to exhaustion; when refused, the exhausted window that
 * resets last, so Retry-After is when the request can really succeed.
 */
export function decide(nowS: number, windows: readonly Window[], counts: readonly number[], allowed: boolean): Decision {
  const states = windows.map((w, i) => {
    const count = counts[i];
    // One count per window (this process's, or Redis's script's): a missing one is a bug, not an unused window.
    if (count === undefined) throw new Error(`rate limit: ${counts.length} counts for ${windows.length} windows`);
    return { limit: w.limit, remaining: Math.max(0, w.limit - count), reset: windowStart(nowS, w) + w.seconds };
  });
  if (!allowed) {
    const exhausted = states.filter((s) => s.remaining === 0);
    const worst = exhausted.reduce((a, b) => (b.reset > a.reset ? b : a));
    return { allowed, ...worst, retryAfter: Math.max(1, worst.reset - nowS) };
  }
  const closest = states.reduce((a, b) => (b.remaining < a.remaining || (b.remaining === a.remaining && b.reset < a.reset) ? b : a));
  return { allowed, ...closest, retryAfter: 0 };
}

/**
 * Fixed-window counters in this process: the limiter when no Redis is
 * configured, and the fallback while Redis is unreachable.
 */
export function createLocalLimiter(clock: Clock): RateLimiter {
  const counters = new Map<string, { count: number; expires: number }>();
  let nextSweep = 0;

  const sweep = (nowS: number) => {
    if (nowS < nextSweep) return;
    nextSweep = nowS + MINUTE;
    for (const [key, c] of counters) if (c.expires <= nowS) counters.delete(key);
  };

  /** Each window's counter key and count so far. */
  const current = (subject: string, windows: readonly Window[], nowS: number) =>
    windows.map((window) => {
      const key = `${subject}:${window.seconds}:${windowStart(nowS, window)}`;
      const c = counters.get(key);
      return { window, key, count: c && c.expires > nowS ? c.count : 0 };
    });

  return {
    async consume(subject, windows) {
      const nowS = Math.floor(clock.now().getTime() / 1000);
      sweep(nowS);
      const slots = current(subject, windows, nowS);
      const allowed = slots.every((s) => s.count < s.window.limit);
      if (allowed) {
        for (const s of slots) {
          s.count += 1;
          counters.set(s.key, { count: s.count, expires: windowStart(nowS, s.window) + s.window.seconds });
        }
      }
      return decide(
        nowS,
        windows,
        slots.map((s) => s.count),
        allowed,
      );
    },
    async peek(subject, windows) {
      const nowS = Math.floor(clock.now().getTime() / 1000);
      return decide(
        nowS,
        windows,
        current(subject, windows, nowS).map((s) => s.count),
        true,
      );
    },
  };
}
