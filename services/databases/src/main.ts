import { fileURLToPath } from "node:url";
import { createLogger, databaseHealth, databaseOutage, migrate, onShutdown, startServer, startTelemetry } from "@dbaas/kit";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { startBackgroundWork } from "./background.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("databases");
const log = createLogger("databases");
const cfg = readConfig();
const ctx = await createContext(cfg, { log });
await migrate(ctx.pool, cfg.schema, fileURLToPath(new URL("./db/migrations", import.meta.url)));
const server = await startServer({
  port: cfg.port,
  routes: routes(ctx),
  internalSecret: cfg.internalSecret,
  log,
  interceptors: [databaseOutage("databases", log)],
  health: () => databaseHealth(ctx.pool),
});
const background = startBackgroundWork(ctx, server.shutdownSignal);
onShutdown(
  log,
  stopTelemetry,
  () => ctx.pool.end(),
  () => ctx.feed.close(),
  () => background,
  () => server.close(),
);
