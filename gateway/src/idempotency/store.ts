import { randomToken, type Clock } from "@dbaas/kit";
import type { RedisLink } from "../redis.ts";

/**
 * Where Idempotency-Key records live. A key is first claimed (in progress,
 * for a short while), then completed with the response to replay (for a day)
 * or released so the request can be retried.
 */
export type Claim =
  | { kind: "claimed"; complete(payload: string): Promise<void>; release(): Promise<void> }
  | { kind: "in-progress"; fingerprint: string }
  | { kind: "done"; fingerprint: string; payload: string };

export interface IdempotencyStore {
  claim(key: string, fingerprint: string): Promise<Claim>;
}

const RESULT_TTL_MS = 24 * 3_600_000;

// Stored values: "p|<claim token>|<fingerprint>" while in progress, "d|<fingerprint>|<payload>" when done.
// Fingerprints are hex SHA-256 and tokens alphanumeric, so "|" never occurs inside them.
function parse(value: string): Exclude<Claim, { kind: "claimed" }> {
  const [state, a, ...rest] = value.split("|");
  if (state === "p") return { kind: "in-progress", fingerprint: rest[0] ?? "" };
  return { kind: "done", fingerprint: a ?? "", payload: rest.join("|") };
}

/** Records in this process: the store without Redis, and the fallback while Redis is down. */
export function createMemoryIdempotencyStore(clock: Clock, claimTtlMs: number): IdempotencyStore {
  const entries = new Map<string, { value: string; expires: number }>();
  let nextSweep = 0;
  const live = (key: string, now: number) => {
    const e = entries.get(key);
    return e && e.expires > now ? e.value : undefined;
  };
  return {
    async claim(key, fingerprint) {
      const now = clock.now().getTime();
      if (now >= nextSweep) {
        nextSweep = now + 60_000;
        for (const [k, e] of entries) if (e.expires <= now) entries.delete(k);
      }
      const existing = live(key, now);
      if (existing !== undefined) return parse(existing);
      const mine = `p|${randomToken(16)}|`;
      entries.set(key, { value: mine + fingerprint, expires: now + claimTtlMs });
      const stillMine = () => live(key, clock.now().getTime())?.startsWith(mine) ?? false;
      return {
        kind: "claimed",
        async complete(payload) {
          if (stillMine()) {
            entries.set(key, { value: `d|${fingerprint}|${payload}`, expires: clock.now().getTime() + RESULT_TTL_MS });
          }
        },
        async release() {
          if (stillMine()) entries.delete(key);
        },
      };
    },
  };
}

/**
 * A Redis claim is a lease: it lasts LEASE_MS and the gateway running the
 * request renews it every LEASE_MS / 3 until the request settles (at most
 * `claimTtlMs`). A gateway that dies mid-request stops renewing, so a retry
 * with the same key runs after a few seconds instead of answering 409 for the
 * whole time a request may take.
 */
export const LEASE_MS = 5_000;

/**
 * Records in Redis, shared by every gateway process. While Redis is unusable
 * the `fallback` takes over, so a retry is still answered from the record
 * when it reaches the same process.
 */
export function createRedisIdempotencyStore(
  link: RedisLink,
  prefix: string,
  claimTtlMs: number,
  fallback: IdempotencyStore,
  leaseMs = LEASE_MS,
): IdempotencyStore {
  return {
    async claim(key, fingerprint) {
      if (!link.usable()) return await fallback.claim(key, fingerprint);
      const redisKey = `${prefix}idem:${key}`;
      const mine = `p|${randomToken(16)}|`;
      let existing: string | null;
      try {
        existing = await link.run((client) => client.claim(redisKey, mine + fingerprint, leaseMs));
      } catch {
        return await fallback.claim(key, fingerprint);
      }
      if (existing !== null) return parse(existing);
      // Renewal is best effort: a missed one lets the claim lapse, as if this gateway had died.
      const renewing = setInterval(
        () => {
          link.run((client) => client.renew(redisKey, mine, leaseMs)).catch(() => {});
        },
        Math.max(1, Math.floor(leaseMs / 3)),
      );
      renewing.unref();
      const stop = setTimeout(() => clearInterval(renewing), claimTtlMs);
      stop.unref();
      // Settling is best effort: if Redis is gone by then, the claim simply expires.
      const settle = async (value: string) => {
        clearInterval(renewing);
        clearTimeout(stop);
        await link.run((client) => client.settle(redisKey, mine, value, RESULT_TTL_MS)).catch(() => {});
      };
      return {
        kind: "claimed",
        complete: (payload) => settle(`d|${fingerprint}|${payload}`),
        release: () => settle(""),
      };
    },
  };
}
