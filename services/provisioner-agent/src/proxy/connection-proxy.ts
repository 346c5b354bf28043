import { existsSync, mkdirSync } from "node:fs";
import net from "node:net";
import { type CounterFile, countersPath, openCounters, removeCounters } from "./counter-file.ts";
import type { ConnectionProxy, ProxyCounters, ProxyRoute } from "./counters.ts";
import { pipeCounted } from "./pipe.ts";

export interface ConnectionProxyOptions {
  /** Directory of the persisted counters (created if missing). */
  dir: string;
  /** Where published ports are served, PostgreSQL-style: addresses separated by commas, `*` for all. */
  listenAddress: string;
  log?: (msg: string) => void;
}

interface Served {
  route: ProxyRoute;
  servers: net.Server[];
  sockets: Set<net.Socket>;
}

/** Node's listen host for one listen_addresses entry; undefined means every address (IPv6 and IPv4). */
export function listenHosts(listenAddress: string): (string | undefined)[] {
  const hosts = listenAddress
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean);
  if (hosts.length === 0) throw new Error("the agent's listen address is empty: the proxy has nowhere to serve");
  return hosts.includes("*") ? [undefined] : hosts;
}

export function createConnectionProxy(opts: ConnectionProxyOptions): ConnectionProxy {
  const log = opts.log ?? (() => {});
  const hosts = listenHosts(opts.listenAddress);
  const served = new Map<string, Served>();
  const files = new Map<string, CounterFile>();
  let dirReady = false;
  let closed = false;

  function counterFile(id: string): CounterFile {
    let f = files.get(id);
    if (!f) {
      if (!dirReady) {
        mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
        dirReady = true;
      }
      f = openCounters(opts.dir, id, (why) => log(`proxy: counters of ${id} start a new epoch (${why})`));
      files.set(id, f);
    }
    return f;
  }

  function listen(server: net.Server, host: string | undefined, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) =>
        reject(new Error(`proxy cannot serve port ${port} on ${host ?? "*"}: ${e.code === "EADDRINUSE" ? "in use" : e.message}`));
      server.once("error", onError);
      server.listen({ host, port }, () => {
        server.off("error", onError);
        resolve();
      });
    });
  }

  async function open(id: string, route: ProxyRoute): Promise<Served> {
    const counter = counterFile(id);
    const s: Served = { route, servers: [], sockets: new Set() };
    const accept = (client: net.Socket) => {
      s.sockets.add(client);
      client.once("close", () => s.sockets.delete(client));
      const upstream = net.connect({ host: s.route.target.host, port: s.route.target.port, allowHalfOpen: true, noDelay: true });
      s.sockets.add(upstream);
      upstream.once("close", () => s.sockets.delete(upstream));
      client.setNoDelay(true);
      client.setKeepAlive(true, 60_000);
      upstream.setKeepAlive(true, 60_000);
      pipeCounted(client, upstream, counter);
    };
    try {
      for (const host of hosts) {
        const server = net.createServer({ allowHalfOpen: true, noDelay: true }, accept);
        // Listening errors after the start (rare) must not crash the agent; the port just stops answering.
        server.on("error", (e) => log(`proxy: port ${route.port} of ${id}: ${e.message}`));
        s.servers.push(server);
        await listen(server, host, route.port);
      }
    } catch (e) {
      await shut(s);
      throw e;
    }
    return s;
  }

  async function shut(s: Served): Promise<void> {
    const closed = s.servers.map((srv) => new Promise<void>((r) => (srv.listening ? srv.close(() => r()) : r())));
    for (const sock of s.sockets) sock.destroy();
    await Promise.all(closed);
  }

  async function unserve(id: string): Promise<void> {
    const s = served.get(id);
    if (!s) return;
    served.delete(id);
    await shut(s);
  }

  return {
    async serve(id, route) {
      if (closed) throw new Error("the connection proxy is closed");
      const cur = served.get(id);
      if (cur && cur.route.port === route.port) {
        // Same port, maybe a new private address (a restarted server): new connections go there.
        cur.route = route;
        return;
      }
      await unserve(id);
      served.set(id, await open(id, route));
    },
    unserve,
    servedPort: (id) => served.get(id)?.route.port,
    async counters(ids) {
      const out = new Map<string, ProxyCounters>();
      for (const id of ids) if (files.has(id) || existsSync(countersPath(opts.dir, id))) out.set(id, counterFile(id).read());
      return out;
    },
    async forget(id) {
      await unserve(id);
      files.get(id)?.close();
      files.delete(id);
      removeCounters(opts.dir, id);
    },
    async close() {
      closed = true;
      await Promise.all([...served.keys()].map((id) => unserve(id)));
      // Kept (closed): counters() still answers with the last values.
      for (const f of files.values()) f.close();
    },
  };
}
