/**
 * The change feed's LISTEN connection outlives a PostgreSQL that is gone for
 * a while (restarting after a crash): it keeps trying until the server is
 * back, not once.
 */
import { createServer, connect, type Server, type Socket } from "node:net";
import pg from "pg";
import { createLogger } from "@dbaas/kit";
import { testServerUrl } from "@dbaas/test/support/pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_CHANNEL, createChangeFeed, type ChangeFeed } from "../src/change-feed.ts";

/** A TCP relay in front of the test server that can refuse connections for a while, on the same port. */
async function startRelay(target: URL) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    server = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server!.listen(port, "127.0.0.1", resolve));
    port = (server!.address() as { port: number }).port;
  };
  await listen();
  return {
    port: () => port,
    async cut() {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
    restore: listen,
    close: () => {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const s of sockets) s.destroy();
      return closed;
    },
  };
}

let relay: Awaited<ReturnType<typeof startRelay>>;
let feed: ChangeFeed;
let direct: string;

beforeAll(async () => {
  direct = await testServerUrl();
  relay = await startRelay(new URL(direct));
  const viaRelay = new URL(direct);
  viaRelay.hostname = "127.0.0.1";
  viaRelay.port = String(relay.port());
  feed = await createChangeFeed(viaRelay.toString(), createLogger("test"));
});

afterAll(async () => {
  await feed?.close();
  await relay?.close().catch(() => {});
});

async function notify(payload: string) {
  const c = new pg.Client({ connectionString: direct });
  await c.connect();
  await c.query("SELECT pg_notify($1, $2)", [AGENT_CHANNEL, payload]);
  await c.end();
}

describe("change feed", () => {
  it("hears notifications again after the server was unreachable for longer than one retry", async () => {
    let heard = 0;
    feed.onAgent("agent-feed-test", () => heard++);
    await notify("agent-feed-test");
    await expect.poll(() => heard, { timeout: 5_000 }).toBe(1);

    // Gone for 2.5 s: the first reconnection attempt (after 1 s) is refused too.
    await relay.cut();
    await new Promise((r) => setTimeout(r, 2_500));
    await relay.restore();

    await expect
      .poll(
        async () => {
          await notify("agent-feed-test");
          return heard;
        },
        { timeout: 10_000, interval: 500 },
      )
      .toBeGreaterThan(1);
  });
});
