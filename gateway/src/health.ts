import http2 from "node:http2";
import type { GatewayContext } from "./context.ts";

/** How long one round of upstream probes is reused: a load balancer polling every second costs one round. */
const CACHE_MS = 1_000;
const PROBE_TIMEOUT_MS = 1_500;

type UpstreamState = "ok" | "unavailable" | "unreachable";

/** GET /healthz of one internal service (open, no credential): 200 means it and its database answer. */
function probe(baseUrl: string): Promise<UpstreamState> {
  return new Promise((done) => {
    const session = http2.connect(baseUrl);
    const timer = setTimeout(() => finish("unreachable"), PROBE_TIMEOUT_MS);
    function finish(state: UpstreamState) {
      clearTimeout(timer);
      session.destroy();
      done(state);
    }
    session.on("error", () => finish("unreachable"));
    const req = session.request({ ":path": "/healthz" });
    req.on("response", (headers) => finish(headers[":status"] === 200 ? "ok" : "unavailable"));
    req.on("error", () => finish("unreachable"));
    req.end();
  });
}

export interface HealthReport {
  status: "ok" | "degraded";
  redis: string;
  maintenance: boolean;
  /** Present when an upstream is not ok: each one's state. */
  upstreams?: Record<string, UpstreamState>;
}

/**
 * What GET /healthz answers: `ok`, or `degraded` with each upstream's state
 * while identity, databases or billing — or the database behind one — does not
 * answer its own /healthz. Still 200 either way: this gateway itself serves
 * (503s that say "try again"), and a load balancer must not take every
 * gateway out because one service behind them is down.
 */
export function createHealth(ctx: GatewayContext): () => Promise<HealthReport> {
  const upstreams: Record<string, string> = {
    identity: ctx.config.identityUrl,
    databases: ctx.config.databasesUrl,
    billing: ctx.config.billingUrl,
  };
  let cached: { at: number; states: Promise<Record<string, UpstreamState>> } | undefined;
  const states = () => {
    if (!cached || Date.now() - cached.at > CACHE_MS) {
      const names = Object.keys(upstreams);
      cached = {
        at: Date.now(),
        states: Promise.all(names.map((n) => probe(upstreams[n]!))).then((s) => Object.fromEntries(names.map((n, i) => [n, s[i]!]))),
      };
    }
    return cached.states;
  };
  return async () => {
    const now = await states();
    const healthy = Object.values(now).every((s) => s === "ok");
    return {
      status: healthy ? "ok" : "degraded",
      redis: ctx.redisHealth(),
      maintenance: ctx.maintenance.state().on,
      ...(healthy ? {} : { upstreams: now }),
    };
  };
}
