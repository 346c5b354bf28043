import type { Client } from "@connectrpc/connect";
import type { Logger } from "@dbaas/kit";
import type { IdentityService } from "@dbaas/proto/identity";
import type { AuthCache } from "./principal-cache.ts";

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
