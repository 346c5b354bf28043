import { createLogger, onShutdown, startServer, startTelemetry } from "@dbaas/kit";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { startControlLoop } from "./control-loop.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("provisioner-agent");
const cfg = readConfig();
const log = createLogger("agent", { agent_id: cfg.agentId });
const ctx = createContext(cfg, log);

await ctx.manager.cleanupLeftovers();
// Templates first: then every create is a copy, not an initdb.
for (const major of ctx.versions) await ctx.manager.ensureTemplate(major);

const server = await startServer({ port: cfg.port, routes: routes(ctx), internalSecret: cfg.internalSecret, log });
const loop = startControlLoop(ctx, server.shutdownSignal);
onShutdown(
  log,
  stopTelemetry,
  // Instances stop with their host; their desired state is unchanged, so the next start brings them back.
  () => ctx.manager.stopAll(),
  () => loop.stopped(),
  () => server.close(),
);
