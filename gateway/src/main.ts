import type { AddressInfo } from "node:net";
import { createMetricsRegistry, onShutdown, startTelemetry } from "@dbaas/kit";
import { createApp } from "./app.ts";
import { readConfig } from "./config.ts";
import { createContext } from "./context.ts";
import { createGatewayServer } from "./server.ts";

const stopTelemetry = await startTelemetry("gateway");
const config = readConfig();
const ctx = createContext(config);
const app = createApp(ctx, createMetricsRegistry());

const server = createGatewayServer(ctx, app);
await new Promise<void>((resolve, reject) => {
  server.once("listening", resolve);
  server.once("error", reject);
  server.listen(config.port, config.host);
});
const { port } = server.address() as AddressInfo;
console.log(`gateway listening on http://${config.host}:${port}`);

onShutdown(
  ctx.log,
  stopTelemetry,
  () => ctx.close(),
  () =>
    new Promise<void>((resolve) => {
      // close() waits for in-flight requests; idle keep-alive sockets are closed at once (Node 19+).
      server.close(() => resolve());
      setTimeout(() => server.closeAllConnections(), 5_000).unref();
    }),
);
