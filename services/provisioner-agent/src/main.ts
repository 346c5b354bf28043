import { onShutdown, startServer, startTelemetry } from "@dbaas/kit";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { startControlLoop } from "./control-loop.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("provisioner-agent");
const config = readConfig();
const ctx = createContext(config);
// Crash leftovers cleared and templates built before the first assignment arrives.
await ctx.runtime.prepare();
const server = await startServer({ port: config.port, routes: routes(ctx), internalSecret: config.internalSecret, log: ctx.log });
const loop = startControlLoop(ctx, server.shutdownSignal);
onShutdown(
  ctx.log,
  stopTelemetry,
  // Local instances stop with the agent; their desired state is unchanged, so the next start brings them back.
  () => ctx.runtime.shutdown(),
  () => loop.stopped(),
  () => server.close(),
);
