import { createServer, connect, type Server, type Socket } from "node:net";
import { randomToken } from "@dbaas/kit";
import { createClient } from "redis";

export const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** A key prefix of one's own, so tests share the machine's Redis without seeing each other. */
export function uniquePrefix(): string {
  return `gwtest:${randomToken(10)}:`;
}

/** A direct client for looking at (and cleaning up) what the gateway wrote. */
export async function inspector() {
  const client = createClient({ url: REDIS_URL });
  client.on("error", () => {});
  await client.connect();
  return {
    client,
    async keys(prefix: string): Promise<string[]> {
      const found: string[] = [];
      for await (const batch of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) found.push(...batch);
      return found;
    },
    async drop(prefix: string) {
      const keys = await this.keys(prefix);
      if (keys.length > 0) await client.del(keys);
    },
    close: () => client.destroy(),
  };
}

/**
 * A TCP relay in front of the real Redis that can be cut and restored on the
 * same port: Redis "going away" and "coming back" as the gateway sees it.
 */
export async function startRelay(targetPort = Number(new URL(REDIS_URL).port || 6379)) {
  const sockets = new Set<Socket>();
  const upstreams = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    server = createServer((client) => {
      const upstream = connect(targetPort, "127.0.0.1");
      upstreams.add(upstream);
      upstream.on("close", () => upstreams.delete(upstream));
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
    get url() {
      return `redis://127.0.0.1:${port}`;
    },
    async cut() {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
    restore: listen,
    /** Redis goes silent: connections stay open but no answer gets through until `resume`. */
    stall() {
      for (const u of upstreams) u.pause();
    },
    resume() {
      for (const u of upstreams) u.resume();
    },
  };
}
