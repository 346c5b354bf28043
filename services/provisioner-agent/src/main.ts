import { createMetricsRegistry, onShutdown, startServer, startTelemetry } from "@dbaas/kit";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { startControlLoop } from "./control-loop.ts";
import { agentMetrics } from "./metrics.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("provisioner-agent");
const config = readConfig();
const ctx = createContext(config);
// Crash leftovers cleared and templates built before the first assignment arrives.
await ctx.runtime.prepare();
const metrics = createMetricsRegistry();
const server = await startServer({ port: config.port, routes: routes(ctx), internalSecret: config.internalSecret, log: ctx.log, metrics });
const loop = startControlLoop(ctx, server.shutdownSignal);
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
