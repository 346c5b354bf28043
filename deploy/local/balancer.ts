import net from "node:net";

/**
 * The local stack's load balancer, with LOCAL_REPLICAS=2 or more: one per
 * scaled service, on the service's own port (what clients, agents and the
 * operator CLIs already use), passing each TCP connection to one of the
 * service's instances — as a cloud's layer-4 load balancer (an AWS NLB, a
 * Kubernetes Service) would in front of a deployment.
 *
 * - Round robin per connection. The internal clients hold one HTTP/2
 *   connection per process, so the load spreads by caller; public clients
 *   open several keep-alive connections and spread over the gateways.
 * - Failover at connect: an instance that refuses (dead, or restarting) is
 *   passed over for the next, and skipped for `DOWN_MS` after; a connection
 *   is refused only when every instance refused it.
 * - A connection whose instance dies is cut (both ways): what was in flight on
 *   it fails, and the client's next connection goes to a live instance. Nothing
 *   is replayed: the balancer cannot know whether a request ran.
 */
export interface Balancer {
  readonly port: number;
  /** Connections handed to each instance since start, by the instance's port. */
  handed(): Record<number, number>;
  close(): Promise<void>;
}

/** After refusing a connection, an instance is tried last for this long. */
const DOWN_MS = 1_000;
/** An instance that accepts no connection within this is passed over (a hung host; loopback answers at once). */
const CONNECT_TIMEOUT_MS = 2_000;

export async function startBalancer(port: number, backends: number[], host = "127.0.0.1"): Promise<Balancer> {
  if (backends.length === 0) throw new Error("a balancer needs at least one instance");
  let next = 0;
  const downUntil = new Map<number, number>();
  const handed: Record<number, number> = Object.fromEntries(backends.map((b) => [b, 0]));
  const open = new Set<net.Socket>();

  /** Every instance once, from the next in turn, those that just refused last. */
  const order = (): number[] => {
    const start = next++ % backends.length;
    const all = backends.map((_, i) => backends[(start + i) % backends.length]!);
    const now = Date.now();
    return [...all.filter((b) => (downUntil.get(b) ?? 0) <= now), ...all.filter((b) => (downUntil.get(b) ?? 0) > now)];
  };

  const connectTo = (backend: number): Promise<net.Socket | undefined> =>
    new Promise((done) => {
      const upstream = net.connect({ port: backend, host });
      const fail = () => {
        upstream.destroy();
        downUntil.set(backend, Date.now() + DOWN_MS);
        done(undefined);
      };
      upstream.setTimeout(CONNECT_TIMEOUT_MS, fail);
      upstream.once("error", fail);
      upstream.once("connect", () => {
        upstream.setTimeout(0);
        upstream.removeListener("error", fail);
        downUntil.delete(backend);
        done(upstream);
      });
    });

  const server = net.createServer({ pauseOnConnect: true, noDelay: true }, async (client) => {
    open.add(client);
    client.on("error", () => client.destroy());
    client.once("close", () => open.delete(client));
    for (const backend of order()) {
      if (client.destroyed) return;
      const upstream = await connectTo(backend);
      if (!upstream) continue;
      if (client.destroyed) return void upstream.destroy();
      handed[backend] = (handed[backend] ?? 0) + 1;
      open.add(upstream);
      upstream.setNoDelay(true);
      // Either side failing or closing takes the other with it: a half-dead pair would hang its client.
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
      upstream.once("close", () => {
        open.delete(upstream);
        client.destroy();
      });
      client.once("close", () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      return;
    }
    // Every instance refused: as if nothing listened here.
    client.resetAndDestroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.removeListener("error", reject);
      resolve();
    });
  });
  return {
    port,
    handed: () => ({ ...handed }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
