/**
 * The gateway benchmark's baseline: a bare Express app answering one route
 * with a fixed JSON body, no auth, no limiter, no upstream. Prints its URL.
 */
import type { AddressInfo } from "node:net";
import express from "express";

const body = JSON.parse(process.env.BARE_BODY ?? "{}") as unknown;
const app = express();
app.get("/v1/databases/:id", (_req, res) => {
  res.json(body);
});
const server = app.listen(0, "127.0.0.1", () => {
  process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
