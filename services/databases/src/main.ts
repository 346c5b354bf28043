import {
  createMetricsRegistry,
  databaseHealth,
  databaseOutage,
  migrate,
  onShutdown,
  outboxMetrics,
  startServer,
  startTelemetry,
} from "@dbaas/kit";
import { startBackgroundWork } from "./background.ts";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { MIGRATIONS_DIR } from "./db/schema.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("databases");
const config = readConfig();
const ctx = await createContext(config);
await migrate(ctx.pool, config.schema, MIGRATIONS_DIR);
const metrics = createMetricsRegistry();
outboxMetrics(metrics, ctx.pool, { table: "outbox", pending: "delivered_at IS NULL" });
const server = await startServer({
  port: config.port,
  routes: routes(ctx),
  internalSecret: config.internalSecret,
  metrics,
  log: ctx.log,
  interceptors: [databaseOutage("databases", ctx.log)],
  health: () => databaseHealth(ctx.pool),
});
const background = startBackgroundWork(ctx, server.shutdownSignal);
onShutdown(
  ctx.log,
  stopTelemetry,
  () => ctx.pool.end(),
  () => ctx.feed.close(),
  () => background,
  () => server.close(),
);
