import { createMetricsRegistry, onShutdown, startServer, startTelemetry } from "@dbaas/kit";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { startControlLoop } from "./control-loop.ts";
import { announceIsolation } from "./isolation.ts";
import { fenceOnStart } from "./leases.ts";
import { agentMetrics } from "./metrics.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("provisioner-agent");
const config = readConfig();
const ctx = createContext(config);
// Shared-uid in production is refused here, before anything is started.
try {
  announceIsolation(config, ctx.runtime, ctx.log);
} catch (e) {
  ctx.log.error((e as Error).message);
  await stopTelemetry();
  process.exit(1);
}
// A stop asked for while starting (a stack stopped just as this agent came back) would otherwise end the process at
// once, leaving the servers and PgBouncers it keeps from its predecessor running: it is honoured once start-up
// reaches a point it can stop from, with the same stop as a running agent's.
let stopAsked = false;
const askStop = () => {
  stopAsked = true;
};
process.on("SIGTERM", askStop);
process.on("SIGINT", askStop);
async function stopIfAsked(close?: () => Promise<void>): Promise<void> {
  if (!stopAsked) return;
  ctx.log.info("shutting down: asked to while starting");
  await close?.();
  await ctx.runtime.shutdown().catch((err: unknown) => ctx.log.error("shutdown hook failed", { error: err }));
  await ctx.proxy.close().catch((err: unknown) => ctx.log.error("shutdown hook failed", { error: err }));
  await stopTelemetry();
  process.exit(0);
}
// Highly available primaries a previous process left running are fenced before anything is served again:
// this process does not know yet whether it still holds their leases.
const fencedAtStart = await fenceOnStart(ctx.runtime, config.dataDir, ctx.log);
// Crash leftovers cleared and templates built before the first assignment arrives.
await ctx.runtime.prepare();
await stopIfAsked();
const metrics = createMetricsRegistry();
const limits = ctx.runtime.resourceLimits;
const server = await startServer({
  port: config.port,
  routes: routes(ctx),
  internalSecret: config.internalSecret,
  log: ctx.log,
  metrics,
  // Servers without kernel limits are said so (instances/cgroups.ts); so is the weaker guard of private ports
  // (the userspace proxy's source address instead of nftables' per-port uids: proxy/meter.ts).
  health: async () => ({
    isolation: ctx.runtime.isolation,
    private_ports_guard: ctx.proxy.sourceAddress ? "source-address" : "nftables",
    resource_limits: limits.enforced,
    ...(limits.reason ? { resource_limits_reason: limits.reason } : {}),
  }),
});
await stopIfAsked(() => server.close());
process.off("SIGTERM", askStop);
process.off("SIGINT", askStop);
const loop = startControlLoop(ctx, server.shutdownSignal, fencedAtStart);
agentMetrics(metrics, loop);
// Hooks run last to first.
onShutdown(
  ctx.log,
  stopTelemetry,
  // After the instances: what their clean stop archived is uploaded too.
  () => loop.archivingStopped(),
  // Its counters closed cleanly (fsync'd), so even a host crash later keeps their epoch.
  () => ctx.proxy.close(),
  // Local instances stop with the agent; their desired state is unchanged, so the next start brings them back.
  () => ctx.runtime.shutdown(),
  () => loop.stopped(),
  () => server.close(),
);
