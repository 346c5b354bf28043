import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { type CounterFile, countersPath, openCounters, removeCounters } from "./counter-file.ts";
import type { ConnectionProxy, ProxyCounters, ProxyRoute } from "./counters.ts";
import { pipeCounted } from "./pipe.ts";
import { admitter } from "./trust.ts";

export interface ConnectionProxyOptions {
  /** Directory of the persisted counters (created if missing). */
  dir: string;
  /** Where published ports are served, PostgreSQL-style: addresses separated by commas, `*` for all. */
  listenAddress: string;
  /**
   * The address every forwarded connection leaves from ({@link proxySourceAddress}): the servers' pg_hba admits
   * customers from it alone, so a connection that did not come through the proxy is refused. The agent always gives
   * one (meter.ts); without it connections leave from the default address and the servers admit customers from
   * anywhere (a benchmark that measures direct connections beside the proxy's, proxy-bench.ts).
   */
  sourceAddress?: string;
  log?: (msg: string) => void;
}

/**
 * Where the userspace proxy's connections to the servers come from: the private-port guard without nftables
 * (docs/product.md, "Tenant isolation on an agent host"). The kernel guard tells the
 * proxied connections by conntrack (`ct status dnat`) and local ones by socket uid; in userspace only the server can
 * check, and all it sees is the source address. So the proxy binds each of its connections to a loopback address of
 * its own, 127.a.b.c outside 127.0.0.0/16 (a = 1..254, derived from the agent's data directory and id like the nft
 * table's name, so two agents on a host differ), and pg_hba admits customer logins from that address alone
 * (server-config.ts). A direct connection from another host is refused: the kernel drops packets from elsewhere that
 * claim a local source address (martians), and the default source towards the private address is never this one. So is
 * a direct one from this host made the ordinary way (its source is 127.0.0.1 or the private address). A local process
 * that binds this address on purpose reaches the server's SCRAM prompt, the same one the published port gives, unmetered:
 * only the kernel can tell who made a socket. An IPv6 private address (::1, the only IPv6 loopback address) leaves
 * nothing to choose: the proxy connects from the private address, which refuses other hosts but not this one's processes.
 */
export function proxySourceAddress(dataDir: string, agentId: string, privateAddress: string): string {
  if (net.isIPv6(privateAddress)) return privateAddress;
  const h = createHash("sha256")
    .update(`${path.resolve(dataDir)}\0${agentId}\0proxy-source`)
    .digest();
  const a = (h[0]! % 254) + 1;
  const c = (h[2]! % 254) + 1;
  const addr = `127.${a}.${h[1]}.${c}`;
  // The private address is a server's own: never the proxy's too.
  return addr === privateAddress ? `127.${a}.${h[1]}.${(c % 254) + 1}` : addr;
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
  /** Each database's trusted sources as a matcher, checked at accept (none: every address). */
  const trusted = new Map<string, (address: string | undefined) => boolean>();
  /**
   * The lists, kept in `<dir>/trusted-sources.json` too: an agent restarted serves its databases again before
   * it hears their lists, and a port must not be open in between.
   */
  const trustFile = path.join(opts.dir, "trusted-sources.json");
  const lists = new Map<string, readonly string[]>();
  try {
    for (const [db, cidrs] of Object.entries(JSON.parse(readFileSync(trustFile, "utf8")) as Record<string, string[]>)) {
      if (Array.isArray(cidrs) && cidrs.length > 0) {
        lists.set(db, cidrs);
        trusted.set(db, admitter(cidrs));
      }
    }
  } catch {
    // none yet (or unreadable: the next trust() rewrites it)
  }
  function saveLists(): void {
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
    const tmp = `${trustFile}.tmp`;
    writeFileSync(tmp, JSON.stringify(Object.fromEntries(lists)), { mode: 0o600 });
    renameSync(tmp, trustFile);
  }
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
    const account = route.account ?? id;
    const counter = counterFile(account);
    const s: Served = { route, servers: [], sockets: new Set() };
    const accept = (client: net.Socket) => {
      // Before a byte goes to the server: a source the database does not trust is reset at once.
      if (!(trusted.get(account)?.(client.remoteAddress) ?? true)) {
        client.resetAndDestroy();
        return;
      }
      s.sockets.add(client);
      client.once("close", () => s.sockets.delete(client));
      const upstream = net.connect({
        host: s.route.target.host,
        port: s.route.target.port,
        ...(opts.sourceAddress ? { localAddress: opts.sourceAddress } : {}),
        allowHalfOpen: true,
        noDelay: true,
      });
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
    ...(opts.sourceAddress ? { sourceAddress: opts.sourceAddress } : {}),
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
    async trust(database, cidrs) {
      if (cidrs.length === 0 && !lists.has(database)) return;
      if (cidrs.length === 0) {
        trusted.delete(database);
        lists.delete(database);
      } else {
        trusted.set(database, admitter(cidrs));
        lists.set(database, [...cidrs]);
      }
      saveLists();
    },
    // The servers guard their private ports by the proxy's source address (their pg_hba): no uid can be told apart here.
    async guardLocal() {},
    // Nothing outside this process holds the lists.
    async repairTrust() {},
    async counters(ids) {
      const out = new Map<string, ProxyCounters>();
      for (const id of ids) if (files.has(id) || existsSync(countersPath(opts.dir, id))) out.set(id, counterFile(id).read());
      return out;
    },
    async forget(id) {
      await unserve(id);
      trusted.delete(id);
      if (lists.delete(id)) saveLists();
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
