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
import { startAlerting, startInvoicing } from "./background.ts";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { MIGRATIONS_DIR } from "./db/schema.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("billing");
const config = readConfig();
const ctx = createContext(config);
await migrate(ctx.pool, config.schema, MIGRATIONS_DIR);
const metrics = createMetricsRegistry();
// Billing's outbox: spending-alert notices waiting for identity to accept them.
outboxMetrics(metrics, ctx.pool, { table: "alert_notifications", pending: "delivered_at IS NULL AND abandoned_at IS NULL" });
const server = await startServer({
  port: config.port,
  routes: routes(ctx),
  internalSecret: config.internalSecret,
  metrics,
  log: ctx.log,
  interceptors: [databaseOutage("billing", ctx.log)],
  health: () => databaseHealth(ctx.pool),
});
const invoicing = startInvoicing(ctx, server.shutdownSignal, config.invoiceCloseIntervalMs);
const alerting = startAlerting(ctx, server.shutdownSignal, config.alertCheckIntervalMs);
onShutdown(
  ctx.log,
  stopTelemetry,
  () => ctx.pool.end(),
  () => alerting,
  () => invoicing,
  () => server.close(),
);
