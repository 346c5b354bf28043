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
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { MIGRATIONS_DIR } from "./db/schema.ts";
import { routes } from "./routes.ts";

const stopTelemetry = await startTelemetry("identity");
const config = readConfig();
const ctx = createContext(config);
const log = ctx.log;
await migrate(ctx.pool, config.databaseSchema, MIGRATIONS_DIR);
if (!config.databasesUrl) log.warn("DATABASES_URL is not set: organizations cannot be deleted");
if (!config.billingUrl) log.warn("BILLING_URL is not set: organizations cannot move to a paid plan");
await ctx.revocations.start();
ctx.mailRelay.start();
const metrics = createMetricsRegistry();
outboxMetrics(metrics, ctx.pool, { table: "mail_outbox", pending: "sent_at IS NULL" });
const server = await startServer({
  port: config.port,
  routes: routes(ctx),
  internalSecret: config.internalSecret,
  metrics,
  log,
  interceptors: [databaseOutage("identity", log)],
  health: async () => ({ ...(await databaseHealth(ctx.pool)), revocation_feed: ctx.revocations.live ? "live" : "down" }),
});
onShutdown(
  log,
  stopTelemetry,
  () => ctx.pool.end(),
  () => ctx.mailRelay.close(),
  () => ctx.revocations.close(),
  () => server.close(),
);
