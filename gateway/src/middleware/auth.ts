import { createHash } from "node:crypto";
import type { RequestHandler } from "express";
import type { Client } from "@connectrpc/connect";
import type { Clock, Logger } from "@dbaas/kit";
import type { IdentityService, Principal } from "@dbaas/proto/identity";
import type { GatewayContext } from "../context.ts";
import { insufficientPermissions, invalidToken } from "../errors.ts";
import type { Permission } from "../routes/route.ts";
import "../locals.ts";

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

export interface RevocationFeedOptions {
  /** A stream silent for this long is taken for dead (identity sends heartbeats every 10 s). */
  silenceMs?: number;
  /** First reconnect delay; it doubles up to `maxBackoffMs`. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export interface RevocationFeed {
  close(): void;
}

/**
 * Keeps one WatchRevocations stream to identity open for the life of the
 * process, reconnecting with backoff, and applies what it carries to `cache`.
 * The cache is live only between the stream's `subscribed` message and its end.
 */
export function startRevocationFeed(
  identity: Pick<Client<typeof IdentityService>, "watchRevocations" | "ackRevocation">,
  cache: AuthCache,
  log: Logger,
  opts: RevocationFeedOptions = {},
): RevocationFeed {
  const silenceMs = opts.silenceMs ?? 30_000;
  const minBackoff = opts.minBackoffMs ?? 100;
  const maxBackoff = opts.maxBackoffMs ?? 5_000;
  const stopped = new AbortController();
  let backoff = minBackoff;
  // One warning per outage, not one per reconnection attempt.
  let outageReported = false;

  const runOnce = async () => {
    const call = new AbortController();
    const abortCall = () => call.abort();
    stopped.signal.addEventListener("abort", abortCall);
    let silence: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(silence);
      silence = setTimeout(() => call.abort(new Error(`no message for ${silenceMs} ms`)), silenceMs);
      silence.unref();
    };
    try {
      arm();
      let subscriptionId = "";
      for await (const res of identity.watchRevocations({}, { signal: call.signal })) {
        arm();
        const event = res.event;
        if (event.case === "subscribed") {
          subscriptionId = event.value.subscriptionId;
          cache.setLive(true);
          backoff = minBackoff;
          outageReported = false;
          log.info("revocation feed subscribed");
        } else if (event.case === "revocation") {
          cache.revoke(event.value);
          // Identity holds the revoking call until this gateway says the revocation is applied: say so now.
          // An acknowledgement that does not arrive costs this stream (identity cuts it), never a stale principal.
          identity.ackRevocation({ subscriptionId, seq: res.seq }, { signal: call.signal, timeoutMs: 5_000 }).catch((err: unknown) => {
            if (!call.signal.aborted) log.warn("could not acknowledge a revocation", { error: err });
          });
        }
      }
    } finally {
      clearTimeout(silence);
      stopped.signal.removeEventListener("abort", abortCall);
      if (cache.live) cache.setLive(false);
    }
  };

  void (async () => {
    while (!stopped.signal.aborted) {
      try {
        await runOnce();
      } catch (err) {
        if (stopped.signal.aborted) break;
        if (!outageReported) log.warn("revocation feed down; authenticating every request until it is back", { error: err });
        outageReported = true;
      }
      if (stopped.signal.aborted) break;
      await new Promise((resolve) => setTimeout(resolve, backoff).unref());
      backoff = Math.min(backoff * 2, maxBackoff);
    }
  })();

  return { close: () => stopped.abort() };
}

// RFC 6750 token68 characters; anything else cannot be one of our credentials.
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]{1,4096}=*) *$/i;

/** Resolves `Authorization: Bearer <token>` to a principal through identity, or answers 401. */
export function authenticate(ctx: GatewayContext): RequestHandler {
  return async (req, res, next) => {
    const header = req.get("authorization");
    if (header === undefined || header === "") throw invalidToken("missing bearer token", false);
    const match = BEARER.exec(header);
    if (!match) throw invalidToken("malformed Authorization header, expected: Bearer <token>", true);
    const token = match[1];
    const principal = await ctx.authCache.resolve(token, async () => {
      const { principal } = await ctx.identity.authenticate({ bearer: token });
      if (!principal) throw new Error("identity answered Authenticate without a principal");
      return principal;
    });
    res.locals.principal = principal;
    next();
  };
}

/** Lets the request through only when the principal's effective permissions include `permission`. */
export const hasPermission = (principal: Principal, permission: Permission): boolean =>
  principal.permissions.includes(permission);

export function requirePermission(permission: Permission): RequestHandler {
  return (_req, res, next) => {
    if (!res.locals.principal || !hasPermission(res.locals.principal, permission)) throw insufficientPermissions(permission);
    next();
  };
}
