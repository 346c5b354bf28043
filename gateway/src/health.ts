import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { GatewayContext } from "./context.ts";

/** How long one probe is reused: a load balancer polling every second costs one probe. */
const CACHE_MS = 1_000;
/** A step of the probe not answered by then counts as hung: a request taking that path would not complete in time. */
export const PROBE_TIMEOUT_MS = 2_000;

/**
 * One step of the probe: `ok` (answered, whatever the answer), `unavailable`
 * (the upstream, or its database, is down: the request gets a quick 503) or
 * `hung` (no answer within PROBE_TIMEOUT_MS).
 */
export type StepState = "ok" | "unavailable" | "hung";

/** What a client request needs, in the order it needs it (auth is the identity round trip). */
const STEPS = ["auth", "rate_limit", "databases", "billing"] as const;
type Step = (typeof STEPS)[number];

type UpstreamState = "ok" | "unavailable" | "unreachable";

export interface HealthReport {
  status: "ok" | "degraded" | "unhealthy";
  redis: string;
  maintenance: boolean;
  /** Present when an upstream's own /healthz (its process and database) is not ok: each one's state. */
  upstreams?: Record<string, UpstreamState>;
  /** Present when a step of the request-path probe is not ok: each step's state. */
  checks?: Record<Step, StepState>;
}

/** GET /healthz of one internal service (open, no credential): 200 means it and its database answer. */
function upstreamHealth(baseUrl: string): Promise<UpstreamState> {
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

/** A bearer no credential ever has (no prefix identity issues): identity refuses it without a database read. */
const PROBE_BEARER = "healthz-probe";
/** Ids the services refuse as malformed: an answer with no database read, and nothing that could exist. */
const PROBE_ID = "healthz-probe";

/** The step's state from how its call ended. */
function stateOf(outcome: unknown): StepState {
  if (outcome === undefined) return "ok";
  const err = ConnectError.from(outcome);
  if (err.code === Code.Unavailable) return "unavailable";
  if (err.code === Code.DeadlineExceeded) return "hung";
  // Any other answer came from the upstream's handler: the round trip works.
  return "ok";
}

function bounded(step: Promise<unknown>): Promise<StepState> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<StepState>((resolve) => {
    timer = setTimeout(() => resolve("hung"), PROBE_TIMEOUT_MS);
  });
  const done = step.then(
    () => stateOf(undefined),
    (err: unknown) => stateOf(err),
  );
  return Promise.race([done, hung]).finally(() => clearTimeout(timer));
}

/**
 * What GET /healthz answers. Two probes, at most one of each per CACHE_MS
 * (concurrent /healthz share them):
 *
 * - the request path: the steps a client request takes, with the objects it
 *   uses — authentication through the principal cache and the identity
 *   client, the rate limiter (Redis, or this process's counters while Redis
 *   is down), a round trip on the databases client (through the GetDatabase
 *   coalescer) and on the billing client — on the HTTP/2 sessions requests
 *   use, not fresh ones: a wedged session, batch or limiter shows here
 *   (issue #26: /healthz said ok for minutes while no request completed);
 * - each upstream's own /healthz (its process and its database).
 *
 * `ok` (200): everything answered. `degraded` (200): an upstream, or the
 * database behind one, is down and says so at once: this gateway still
 * serves (quick 503s that say "try again"), and a load balancer must not take
 * every gateway out because one service behind them is down. `unhealthy`
 * (503): a step of the request path did not answer within PROBE_TIMEOUT_MS,
 * so a request taking it would hang until its deadline: a load balancer
 * takes this gateway out.
 */
export function createHealth(ctx: GatewayContext): () => Promise<{ httpStatus: number; report: HealthReport }> {
  const upstreamUrls: Record<string, string> = {
    identity: ctx.config.identityUrl,
    databases: ctx.config.databasesUrl,
    billing: ctx.config.billingUrl,
  };
  const probeUpstreams = async (): Promise<Record<string, UpstreamState>> => {
    const names = Object.keys(upstreamUrls);
    const states = await Promise.all(names.map((n) => upstreamHealth(upstreamUrls[n]!)));
    return Object.fromEntries(names.map((n, i) => [n, states[i]!]));
  };
  const probePath = async (): Promise<Record<Step, StepState>> => {
    const calls: Record<Step, () => Promise<unknown>> = {
      auth: () => ctx.authCache.resolve(PROBE_BEARER, async () => (await ctx.identity.authenticate({ bearer: PROBE_BEARER })).principal!),
      rate_limit: () => ctx.limiter.consume("healthz:probe", [{ limit: 1_000_000_000, seconds: 60 }]),
      databases: () => ctx.databases.getDatabase({ organizationId: PROBE_ID, id: PROBE_ID }),
      billing: () => ctx.billing.getUsage({ organizationId: PROBE_ID }),
    };
    const states = await Promise.all(STEPS.map((step) => bounded(calls[step]())));
    return Object.fromEntries(STEPS.map((step, i) => [step, states[i]!])) as Record<Step, StepState>;
  };
  let cached: { at: number; probes: Promise<[Record<Step, StepState>, Record<string, UpstreamState>]> } | undefined;
  return async () => {
    if (!cached || Date.now() - cached.at > CACHE_MS) cached = { at: Date.now(), probes: Promise.all([probePath(), probeUpstreams()]) };
    const [checks, upstreams] = await cached.probes;
    const steps = Object.values(checks);
    const upstreamsOk = Object.values(upstreams).every((s) => s === "ok");
    const status = steps.includes("hung") ? "unhealthy" : steps.includes("unavailable") || !upstreamsOk ? "degraded" : "ok";
    return {
      httpStatus: status === "unhealthy" ? 503 : 200,
      report: {
        status,
        redis: ctx.redisHealth(),
        maintenance: ctx.maintenance.state().on,
        ...(upstreamsOk ? {} : { upstreams }),
        ...(steps.every((s) => s === "ok") ? {} : { checks }),
      },
    };
  };
}
