import { randomUUID, createHash } from "node:crypto";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { INSTANCE_ID_RE as ID_RE } from "../instance-access.ts";
import { listenHosts } from "./connection-proxy.ts";
import type { ConnectionProxy, LocalServer, ProxyCounters, ProxyRoute } from "./counters.ts";
import { nftCommand, nftName, nftString } from "./nft.ts";
import { TRUST_DECLARATIONS, trustHookLines, trustScript, trustStateIn } from "./nft-trust.ts";

/*
 * The kernel forwards and counts instead of the agent (issue 13: the
 * in-process proxy cost more than half the throughput). One nftables table
 * per agent instance:
 *
 *   dnat_ports    published port → private address . port (the routes'
 *                 targets: AGENT_PRIVATE_ADDRESS, loopback by default); the nat chains
 *                 (output for local clients, prerouting for other hosts)
 *                 DNAT connections to the listen address through it.
 *   in_counters   published port → the database's named counter "in_<id>",
 *   out_counters  and "out_<id>"; each counter's comment is its epoch.
 *
 * A connection is counted by its conntrack ORIGINAL destination port (the
 * published one), and only if it was DNAT'd: replication and the agent's
 * own connections go to private ports or sockets and never count, nor do
 * this host's outgoing connections to some remote port that happens to be
 * published here. Client → database packets all end in the input hook,
 * database → client packets all leave through postrouting (whether the
 * client is local or not), so each packet is counted once. The counts are
 * IP packet bytes, headers included.
 *
 * Private ports take only what came through a published port: the guard
 * chains drop a new connection to a private port (`private_ports`: the
 * routes' target ports and the running servers' own, `guardLocal`) unless it
 * was DNAT'd, or comes from AGENT_PRIVATE_NETWORK (input hook: replicas on
 * other hosts), or is made on this host (output hook, by socket uid) by the
 * agent or by a uid let through to that very port: `local_peers` holds
 * (private address . port . uid) for each server's own port and uid, and for
 * the port each replica or standby streams from and the replica's uid. A
 * direct connection from any other local uid — another tenant's server
 * included — is refused (a TCP reset), one from elsewhere is dropped.
 *
 * A replica on this host whose primary is another agent's (several agents on
 * one host: the local stack) connects to a port of that agent's table, which
 * does not know its uid. So each agent vouches for its own servers' entries:
 * chain `vouch_out` (output, just before the guards) marks a new connection
 * found in its `local_peers` (ct mark 0xdbaa0000/16, which only root sets),
 * and every agent's guard lets a marked connection through.
 *
 * The kernel keeps counting while the agent is down and keeps already
 * established connections through a crash; a restarted agent takes its table
 * over with the counters as they are (same epoch). Only DNAT rules are
 * dropped at takeover: the agent serves what is running again, and a stale
 * rule could otherwise send a reused port to the wrong server.
 */

const TABLE_RE = /^dbaas_[0-9a-f]{12}$/;
const ROUTE_LOCALNET = "/proc/sys/net/ipv4/conf/all/route_localnet";

export interface NftMeterOptions {
  /** The agent's data directory: with the agent id it names the table; a table whose data directory is gone is reaped. */
  dataDir: string;
  agentId: string;
  /** Where published ports are served, PostgreSQL-style (IPv4 addresses, `*` for every local one). */
  listenAddress: string;
  /**
   * The servers' private address, every route's target (AGENT_PRIVATE_ADDRESS; default 127.0.0.1). Only a
   * loopback one, served beyond loopback, needs route_localnet (a pod IP does not).
   */
  privateAddress?: string;
  /** The nft binary (NFT_PATH; default `nft` in PATH). */
  nftPath?: string;
  /** AGENT_PRIVATE_NETWORK: who may reach a private port directly from another host (replication). Default: the private address alone. */
  privateNetwork?: string;
  /**
   * Uids whose connections on this host reach every private port directly (ranges as [first, last]). The agent's
   * own always does (its probes, its sessions); the servers' uids reach only the ports `guardLocal` names for them.
   */
  localUids?: readonly (number | readonly [number, number])[];
  log?: (msg: string) => void;
}

/** The table of the agent owning `dataDir` as `agentId`: several agents (and test stacks) share a host. */
export function nftTableName(dataDir: string, agentId: string): string {
  return `dbaas_${createHash("sha256")
    .update(`${path.resolve(dataDir)}\0${agentId}`)
    .digest("hex")
    .slice(0, 12)}`;
}

/** The table comment: which agent owns it and where its data lives (what reaping checks). At most 128 characters. */
function tableComment(dataDir: string, agentId: string): string {
  const dir = path.resolve(dataDir);
  const full = `agent ${agentId} dir ${dir}`;
  const c = full.length <= 128 ? full : `dir ${dir}`;
  if (c.length > 128) throw new Error(`the data directory ${dir} is too long for an nft table comment (128 characters)`);
  return c;
}

/**
 * Whether `dir` certainly does not exist. An unprivileged agent may be unable to look (EACCES on an ancestor):
 * that is not gone, or it would delete a running agent's table.
 */
function gone(dir: string): boolean {
  try {
    statSync(dir);
    return false;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR";
  }
}

/** How the nat chains recognise a connection to a published port: its destination address. */
function listenMatch(listenAddress: string): { match: string; beyondLoopback: boolean } {
  const hosts = listenHosts(listenAddress);
  if (hosts.includes(undefined)) return { match: "fib daddr type local", beyondLoopback: true };
  const addrs = hosts.map((h) => (h === "localhost" ? "127.0.0.1" : h === "0.0.0.0" ? "*" : h!));
  if (addrs.includes("*")) return { match: "fib daddr type local", beyondLoopback: true };
  for (const a of addrs) if (!net.isIPv4(a)) throw new Error(`the nftables meter serves IPv4 listen addresses only, not "${a}"`);
  return { match: `ip daddr { ${addrs.join(", ")} }`, beyondLoopback: addrs.some((a) => !a.startsWith("127.")) };
}

const counterName = (dir: "in" | "out", id: string) => `${dir}_${id}`;

/** The ct mark (upper 16 bits) by which an agent of this host vouches for its server's connection to a private port. */
const VOUCHED = "0xdbaa0000";
const VOUCH_MASK = "0xffff0000";

function checkLocalServer(id: string, s: LocalServer): void {
  if (!ID_RE.test(id)) throw new Error(`invalid instance id ${JSON.stringify(id)}`);
  if (!Number.isInteger(s.uid) || s.uid < 0 || s.uid > 0xfffffffe) throw new Error(`invalid uid ${s.uid}`);
  for (const a of [s.own, ...(s.streamsFrom ? [s.streamsFrom] : [])]) {
    if (!Number.isInteger(a.port) || a.port < 1 || a.port > 65535) throw new Error(`invalid port ${a.port}`);
    if (!net.isIP(a.host)) throw new Error(`invalid address ${JSON.stringify(a.host)}`);
  }
}

interface Served {
  route: ProxyRoute;
  /** Listening sockets on the published port: never reached (the DNAT comes first), they keep the port taken for everyone else. */
  holds: net.Server[];
}

/**
 * A `ConnectionProxy` whose forwarding and counting the kernel does
 * (nftables DNAT and named counters). Creating it takes the agent's table
 * over synchronously (creating it if missing) and throws if nft cannot be
 * used here: the caller falls back to the in-process proxy (meter.ts).
 */
export function createNftMeter(opts: NftMeterOptions): ConnectionProxy {
  const log = opts.log ?? (() => {});
  const nft = nftCommand(opts.nftPath);
  const dataDir = path.resolve(opts.dataDir);
  const table = nftTableName(dataDir, opts.agentId);
  const comment = nftString(tableComment(dataDir, opts.agentId));
  const { match, beyondLoopback } = listenMatch(opts.listenAddress);
  // Other hosts' connections DNAT'd to a loopback address need route_localnet (and a guard); to any other address, nothing.
  const localnet = beyondLoopback && (opts.privateAddress ?? "127.0.0.1").startsWith("127.");
  const hosts = listenHosts(opts.listenAddress);
  const t = `ip ${table}`;
  const privateAddress = opts.privateAddress ?? "127.0.0.1";
  const uids = [
    ...new Set([process.getuid?.() ?? 0, ...(opts.localUids ?? [])].map((u) => (typeof u === "number" ? String(u) : `${u[0]}-${u[1]}`))),
  ].join(", ");
  const toPrivate = `ip daddr ${privateAddress} tcp dport @private_ports ct state new`;

  /**
   * The whole guard of private ports, written anew (one transaction with whatever else changes; a repair puts back
   * what was changed behind the agent's back): `private_ports` (the served routes' targets and the servers' own
   * ports), `local_peers` (which uid may reach which private address and port from this host) and the chains.
   */
  function guardLines(targets: Iterable<{ host: string; port: number }>, servers: Iterable<LocalServer>): string[] {
    const ports = new Set<number>();
    for (const target of targets) if (target.host === privateAddress) ports.add(target.port);
    const peers = new Set<string>();
    for (const srv of servers) {
      if (srv.own.host === privateAddress) ports.add(srv.own.port);
      for (const a of [srv.own, ...(srv.streamsFrom ? [srv.streamsFrom] : [])])
        if (net.isIPv4(a.host)) peers.add(`${a.host} . ${a.port} . ${srv.uid}`);
    }
    return [
      ...["vouch_out", "guard_out", "guard_in"].map((c) => `flush chain ${t} ${c}`),
      `flush set ${t} private_ports`,
      `flush set ${t} local_peers`,
      ...(ports.size > 0 ? [`add element ${t} private_ports { ${[...ports].join(", ")} }`] : []),
      ...(peers.size > 0 ? [`add element ${t} local_peers { ${[...peers].join(", ")} }`] : []),
      // This agent's word for its servers' connections, to its own ports and to another agent's of this host.
      `add rule ${t} vouch_out meta l4proto tcp ct state new ip daddr . tcp dport . meta skuid @local_peers ct mark set ct mark and 0xffff or ${VOUCHED}`,
      // This host's connections to a private port: DNAT'd (through a published port), the agent's, or a uid let
      // through to that port (its server's, a replica's of it), by this agent or another of this host.
      `add rule ${t} guard_out ${toPrivate} ct status dnat accept`,
      `add rule ${t} guard_out ${toPrivate} meta skuid { ${uids} } accept`,
      `add rule ${t} guard_out ${toPrivate} ip daddr . tcp dport . meta skuid @local_peers accept`,
      `add rule ${t} guard_out ${toPrivate} ct mark and ${VOUCH_MASK} == ${VOUCHED} accept`,
      // Refused at once (a local client learns it at once; a dropped SYN would be retried for a minute).
      `add rule ${t} guard_out ${toPrivate} reject with tcp reset`,
      // Other hosts': DNAT'd, or replication from the private network.
      `add rule ${t} guard_in iifname != "lo" ${toPrivate} ct status dnat accept`,
      `add rule ${t} guard_in iifname != "lo" ${toPrivate} ip saddr ${opts.privateNetwork ?? privateAddress} accept`,
      `add rule ${t} guard_in iifname != "lo" ${toPrivate} drop`,
    ];
  }

  // The data directory exists before its table does, so another agent's reaping never takes a new table for a stale one.
  mkdirSync(dataDir, { recursive: true });
  if (localnet && readFileSync(ROUTE_LOCALNET, "utf8").trim() !== "1") {
    // Other hosts' connections are DNAT'd to the private address; to loopback (the default) the kernel drops them
    // as martian unless this is set (as kube-proxy does). Only root outside a container can set it.
    try {
      writeFileSync(ROUTE_LOCALNET, "1");
    } catch (e) {
      throw new Error(
        `other hosts reach a loopback private address only with net.ipv4.conf.all.route_localnet=1, which the agent cannot set (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): set it on the host or give AGENT_PRIVATE_ADDRESS a non-loopback address`,
      );
    }
    log(`nft meter: set ${ROUTE_LOCALNET} to 1 so other hosts reach the databases' loopback addresses`);
  }
  // One transaction: the chains are rebuilt (no gap in counting: the old rules go as the new ones come), the DNAT
  // entries of the previous agent process dropped, the counters and their port maps kept.
  nft.applySync(
    [
      `table ${t} {`,
      `  comment ${comment}`,
      "  map dnat_ports { type inet_service : ipv4_addr . inet_service; }",
      "  map in_counters { type inet_service : counter; }",
      "  map out_counters { type inet_service : counter; }",
      "  chain nat_out { type nat hook output priority -100; }",
      "  chain nat_pre { type nat hook prerouting priority -100; }",
      "  chain count_in { type filter hook input priority 0; }",
      "  chain count_out { type filter hook postrouting priority 0; }",
      "  set private_ports { type inet_service; }",
      "  set local_peers { type ipv4_addr . inet_service . uid; }",
      "  chain vouch_out { type filter hook output priority -1; }",
      "  chain guard_out { type filter hook output priority 0; }",
      "  chain guard_in { type filter hook input priority 0; }",
      ...TRUST_DECLARATIONS,
      "}",
      ...["nat_out", "nat_pre", "count_in", "count_out"].map((c) => `flush chain ${t} ${c}`),
      `flush map ${t} dnat_ports`,
      // The guard: nothing served yet, no server known (the agent serves and guards again what runs).
      ...guardLines([], []),
      // Trusted sources stay as the previous process left them (read back below) until this one is told its own.
      ...trustHookLines(t),
      `add rule ${t} nat_out ${match} dnat ip to tcp dport map @dnat_ports`,
      `add rule ${t} nat_pre ${match} dnat ip to tcp dport map @dnat_ports`,
      // With route_localnet, only DNAT'd connections may reach loopback from outside (kube-proxy's guard too).
      ...(localnet ? [`add rule ${t} count_in iifname != "lo" ip daddr 127.0.0.0/8 ct status ! dnat drop`] : []),
      `add rule ${t} count_in meta l4proto tcp ct status dnat ct direction original counter name ct original proto-dst map @in_counters`,
      `add rule ${t} count_out meta l4proto tcp ct status dnat ct direction reply counter name ct original proto-dst map @out_counters`,
      "",
    ].join("\n"),
  );

  const served = new Map<string, Served>();
  /** The servers the guard knows (guardLocal): their uids, own private ports and the ports they stream from. */
  const locals = new Map<string, LocalServer>();
  /** The guard's lines for the served routes (with `route` for `id` instead of its current one; null: none) and the servers. */
  function guardNow(id?: string, route?: ProxyRoute | null): string[] {
    const routes = new Map([...served].map(([k, v]) => [k, v.route]));
    if (id !== undefined) {
      if (route) routes.set(id, route);
      else routes.delete(id);
    }
    return guardLines(
      [...routes.values()].map((r) => r.target),
      locals.values(),
    );
  }
  /** Ports whose counters (maps in_counters and out_counters) belong to a database, as in the kernel. */
  const countedPorts = new Map<number, string>();
  /** Databases whose counter objects exist in the kernel. */
  const counted = new Set<string>();
  /** Trusted sources given (database → CIDRs; non-empty lists only), and databases whose trust objects may exist. */
  const trusts = new Map<string, readonly string[]>();
  const trustObjects = new Set<string>();
  let closed = false;

  /** Script lines putting every database's trusted sources in place, for the served routes plus `extra`. */
  function trustLines(extra?: ProxyRoute & { id: string }): string[] {
    const ports = new Map<number, string>();
    for (const [id, s] of served) ports.set(s.route.port, s.route.account ?? id);
    if (extra) ports.set(extra.port, extra.account ?? extra.id);
    const gone = [...trustObjects].filter((db) => !trusts.has(db));
    return trustScript(t, trusts, ports, gone);
  }
  function trustApplied(): void {
    trustObjects.clear();
    for (const db of trusts.keys()) trustObjects.add(db);
  }

  let tail: Promise<unknown> = (async () => {
    await reapOthers();
    for (const o of await nft.json(["list", "table", "ip", table])) {
      const c = o.counter as { name: string } | undefined;
      if (c?.name.startsWith("in_")) counted.add(c.name.slice(3));
      const m = o.map as { name: string; elem?: [number, string][] } | undefined;
      if (m?.name === "in_counters") for (const [port, name] of m.elem ?? []) countedPorts.set(port, name.slice(3));
    }
    const kept = trustStateIn(await nft.json(["list", "table", "ip", table]));
    for (const db of kept.objects) trustObjects.add(db);
    for (const [db, cidrs] of kept.lists) if (!trusts.has(db)) trusts.set(db, cidrs);
  })().catch((e: Error) =>
    // Not fatal: counters are only ever added with `add` (an existing one is kept), so serving works without this.
    log(`nft meter: reading table ${table} back failed: ${e.message}`),
  );
  /** Changes run one at a time, in order, after the takeover. */
  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = tail.then(fn);
    tail = run.catch(() => {});
    return run;
  }

  /** Deletes the tables of agents whose data directory no longer exists (test stacks destroyed, agents removed). */
  async function reapOthers(): Promise<void> {
    const tables = (await nft.json(["list", "tables", "ip"])).map((o) => (o.table as { name: string }).name);
    for (const name of tables) {
      if (name === table || !TABLE_RE.test(name)) continue;
      try {
        // JSON leaves table comments out; the text has it on the table's first line.
        const m = /^\s*comment "(?:agent \S+ )?dir ([^"]+)"$/m.exec(await nft.text(["-t", "list", "table", "ip", name]));
        if (!m || !gone(m[1]!)) continue;
        await nft.apply(`delete table ip ${name}\n`);
        log(`nft meter: removed table ${name} of a gone agent (${m[1]})`);
      } catch (e) {
        // Another agent reaping the same table at the same moment, most likely: it is gone either way.
        log(`nft meter: table ${name} not reaped: ${(e as Error).message}`);
      }
    }
  }

  function hold(port: number): Promise<net.Server[]> {
    const servers: net.Server[] = [];
    const listenOn = (host: string | undefined) =>
      new Promise<void>((resolve, reject) => {
        // A connection only lands here if it bypassed the DNAT (IPv6 on a wildcard listen address): refuse it.
        const srv = net.createServer((s) => s.destroy());
        servers.push(srv);
        srv.once("error", (e: NodeJS.ErrnoException) =>
          reject(new Error(`cannot serve port ${port} on ${host ?? "*"}: ${e.code === "EADDRINUSE" ? "in use" : e.message}`)),
        );
        srv.listen({ host, port }, () => resolve());
      });
    return hosts
      .reduce((p, h) => p.then(() => listenOn(h)), Promise.resolve())
      .then(
        () => servers,
        async (e) => {
          await release(servers);
          throw e;
        },
      );
  }

  const release = (servers: net.Server[]) =>
    Promise.all(servers.map((s) => new Promise<void>((r) => (s.listening ? s.close(() => r()) : r()))));

  function dnatElement(route: ProxyRoute): string {
    if (!net.isIPv4(route.target.host)) throw new Error(`the nftables meter forwards to IPv4 addresses only, not ${route.target.host}`);
    return `${route.port} : ${route.target.host} . ${route.target.port}`;
  }

  function checkRoute(id: string, route: ProxyRoute): void {
    if (!ID_RE.test(id)) throw new Error(`invalid database id ${JSON.stringify(id)}`);
    if (route.account !== undefined && !ID_RE.test(route.account)) throw new Error(`invalid database id ${JSON.stringify(route.account)}`);
    for (const p of [route.port, route.target.port]) if (!Number.isInteger(p) || p < 1 || p > 65535) throw new Error(`invalid port ${p}`);
  }

  async function unserveNow(id: string): Promise<void> {
    const s = served.get(id);
    if (!s) return;
    // Counting stays: connections already established drain (the server stops right after). Its private port stays
    // guarded while guardLocal has its server.
    await nft.apply([`delete element ${t} dnat_ports { ${s.route.port} }`, ...guardNow(id, null), ""].join("\n"));
    served.delete(id);
    await release(s.holds);
  }

  /**
   * Script lines that drop the port-to-counter entries of `account` (and any other account's on `keepPort`),
   * but for ports other routes serve now: a pooler's port counts as its database (ProxyRoute.account) beside
   * the database's own.
   */
  function unmapLines(id: string, keepPort?: number, account = id): { lines: string[]; ports: number[] } {
    const servedElsewhere = new Set([...served].filter(([rid]) => rid !== id).map(([, s]) => s.route.port));
    const ports = [...countedPorts]
      .filter(([p, owner]) => (owner === account && p !== keepPort && !servedElsewhere.has(p)) || (p === keepPort && owner !== account))
      .map(([p]) => p);
    return {
      lines: ports.flatMap((p) => [`delete element ${t} in_counters { ${p} }`, `delete element ${t} out_counters { ${p} }`]),
      ports,
    };
  }

  return {
    serve: (id, route) =>
      serial(async () => {
        if (closed) throw new Error("the connection meter is closed");
        checkRoute(id, route);
        const cur = served.get(id);
        if (cur && cur.route.port === route.port) {
          // Same port, maybe a new private address (a restarted server): new connections go there.
          if (cur.route.target.host !== route.target.host || cur.route.target.port !== route.target.port) {
            await nft.apply(
              [
                `delete element ${t} dnat_ports { ${route.port} }`,
                `add element ${t} dnat_ports { ${dnatElement(route)} }`,
                ...guardNow(id, route),
                "",
              ].join("\n"),
            );
            cur.route = route;
          }
          return;
        }
        await unserveNow(id);
        const holds = await hold(route.port);
        try {
          // The counters are the account's: a pooler's port counts as its database.
          const acct = route.account ?? id;
          const lines: string[] = [];
          const epoch = randomUUID();
          if (!counted.has(acct)) {
            // `add` keeps a counter that exists (its count and epoch): a new epoch only with a new kernel object.
            for (const d of ["in", "out"] as const)
              lines.push(`add counter ${t} ${nftName(counterName(d, acct))} { comment ${nftString(epoch)}; }`);
          }
          const unmap = unmapLines(id, route.port, acct);
          lines.push(...unmap.lines);
          if (countedPorts.get(route.port) !== acct) {
            lines.push(`add element ${t} in_counters { ${route.port} : ${nftName(counterName("in", acct))} }`);
            lines.push(`add element ${t} out_counters { ${route.port} : ${nftName(counterName("out", acct))} }`);
          }
          lines.push(`add element ${t} dnat_ports { ${dnatElement(route)} }`);
          lines.push(...guardNow(id, route));
          // In the same transaction: the port never forwards a connection its database's trusted sources refuse.
          lines.push(...trustLines({ ...route, id }));
          await nft.apply(`${lines.join("\n")}\n`);
          trustApplied();
          if (!counted.has(acct)) log(`nft meter: counters of ${acct} start epoch ${epoch}`);
          counted.add(acct);
          for (const p of unmap.ports) countedPorts.delete(p);
          countedPorts.set(route.port, acct);
          served.set(id, { route, holds });
        } catch (e) {
          await release(holds);
          throw e;
        }
      }),
    unserve: (id) => serial(() => unserveNow(id)),
    servedPort: (id) => served.get(id)?.route.port,
    trust: (database, cidrs) =>
      serial(async () => {
        if (!ID_RE.test(database)) throw new Error(`invalid database id ${JSON.stringify(database)}`);
        // Nothing to change: open, and nothing of it in the kernel.
        if (cidrs.length === 0 && !trusts.has(database) && !trustObjects.has(database)) return;
        if (cidrs.length === 0) trusts.delete(database);
        else trusts.set(database, [...cidrs]);
        await nft.apply(`${trustLines().join("\n")}\n`);
        trustApplied();
      }),
    guardLocal: (id, server) =>
      serial(async () => {
        if (server) checkLocalServer(id, server);
        else if (!locals.has(id)) return;
        const before = locals.get(id);
        if (server) locals.set(id, server);
        else locals.delete(id);
        try {
          await nft.apply(`${guardNow().join("\n")}\n`);
        } catch (e) {
          if (before) locals.set(id, before);
          else locals.delete(id);
          throw e;
        }
      }),
    repairTrust: () =>
      serial(async () => {
        if (closed) return;
        await nft.apply(`${[...trustLines(), ...guardNow()].join("\n")}\n`);
        trustApplied();
      }),
    async counters(ids) {
      await tail;
      const found = new Map<string, { epoch: string; bytes: bigint }>();
      for (const o of await nft.json(["list", "counters", "table", "ip", table])) {
        const c = o.counter as { name: string; comment?: string; bytes: string };
        found.set(c.name, { epoch: c.comment ?? "", bytes: BigInt(c.bytes) });
      }
      const out = new Map<string, ProxyCounters>();
      for (const id of ids) {
        const i = found.get(counterName("in", id));
        const o = found.get(counterName("out", id));
        if (i && o) out.set(id, { epoch: i.epoch, bytesIn: i.bytes, bytesOut: o.bytes });
      }
      return out;
    },
    forget: (id) =>
      serial(async () => {
        await unserveNow(id);
        if (locals.delete(id)) await nft.apply(`${guardNow().join("\n")}\n`);
        if (!ID_RE.test(id) || !counted.has(id)) return;
        const unmap = unmapLines(id);
        const lines = [...unmap.lines, ...(["in", "out"] as const).map((d) => `delete counter ${t} ${nftName(counterName(d, id))}`)];
        await nft.apply(`${lines.join("\n")}\n`);
        for (const p of unmap.ports) countedPorts.delete(p);
        counted.delete(id);
      }),
    close: () =>
      serial(async () => {
        closed = true;
        // The instances stop with the agent: no new connections; the counters stay for the next agent process.
        await nft.apply([`flush map ${t} dnat_ports`, ...guardLines([], []), ""].join("\n"));
        const all = [...served.values()];
        served.clear();
        locals.clear();
        await Promise.all(all.map((s) => release(s.holds)));
      }),
  };
}
