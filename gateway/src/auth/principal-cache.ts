import { createHash } from "node:crypto";
import type { Clock } from "@dbaas/kit";
import type { Principal } from "@dbaas/proto/identity";

const MAX_TTL_MS = 30_000;
const MAX_ENTRIES = 10_000;

/** What identity says has become stale: every cached principal matching all the fields set. */
export interface Revocation {
  organizationId: string;
  userId: string;
  credentialId: string;
}

/**
 * Principals recently resolved by identity, keyed by the SHA-256 of the
 * bearer token so the raw credential is never held as a key. An entry lives at
 * most 30 s and never beyond the credential's own expiry. Concurrent lookups
 * of one token share one call to identity.
 *
 * The cache is trusted only while identity's revocation feed is live: a
 * removed member, a demotion, a revoked key or a changed plan must take effect
 * on the very next request. So while the feed is down nothing is served from
 * or stored in the cache, and a lookup that overlapped a revocation (or a
 * change of the feed's state) is used for its own request but not kept.
 */
export interface AuthCache {
  resolve(token: string, load: () => Promise<Principal>): Promise<Principal>;
  revoke(revocation: Revocation): void;
  /** The feed came up (subscribed) or went down. */
  setLive(live: boolean): void;
  readonly live: boolean;
  readonly size: number;
}

function tokenKey(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

function matches(p: Principal, r: Revocation): boolean {
  if (r.organizationId === "" && r.userId === "" && r.credentialId === "") return false;
  return (
    (r.organizationId === "" || p.organizationId === r.organizationId) &&
    (r.userId === "" || p.userId === r.userId) &&
    (r.credentialId === "" || p.credentialId === r.credentialId)
  );
}

export function createAuthCache(clock: Clock): AuthCache {
  const entries = new Map<string, { principal: Principal; until: number }>();
  const inflight = new Map<string, Promise<Principal>>();
  let live = false;
  // Bumped by every revocation and every change of the feed's state.
  let epoch = 0;
  const forgetAll = () => {
    epoch++;
    entries.clear();
    inflight.clear();
  };
  return {
    get live() {
      return live;
    },
    get size() {
      return entries.size;
    },
    setLive(next) {
      live = next;
      forgetAll();
    },
    revoke(revocation) {
      epoch++;
      for (const [key, entry] of entries) if (matches(entry.principal, revocation)) entries.delete(key);
      // A lookup in flight may have read the state from before the revocation: later requests must not join it.
      inflight.clear();
    },
    async resolve(token, load) {
      if (!live) return await load();
      const key = tokenKey(token);
      const now = clock.now().getTime();
      const hit = entries.get(key);
      if (hit && hit.until > now) return hit.principal;
      if (hit) entries.delete(key);
      const pending = inflight.get(key);
      if (pending) return await pending;
      const startedIn = epoch;
      const loading = load().then((principal) => {
        if (epoch !== startedIn || !live) return principal;
        const expires = principal.expiresAt ? Number(principal.expiresAt.seconds) * 1000 : Infinity;
        const until = Math.min(clock.now().getTime() + MAX_TTL_MS, expires);
        // Oldest first out: Map iteration follows insertion order.
        if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
        entries.set(key, { principal, until });
        return principal;
      });
      inflight.set(key, loading);
      try {
        return await loading;
      } finally {
        if (inflight.get(key) === loading) inflight.delete(key);
      }
    },
  };
}
