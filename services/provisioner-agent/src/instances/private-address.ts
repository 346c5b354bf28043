import { lstat, readlink, rename, symlink, unlink } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { readOwned } from "../safe-fs.ts";
import type { Host } from "./host.ts";

/**
 * Where an instance's server really listens. Clients use the database's
 * published port, which the agent's connection proxy serves (src/proxy/);
 * the server listens on the agent's private address only (loopback unless
 * AGENT_PRIVATE_ADDRESS says otherwise: replicas on other hosts stream from
 * it), on a private port chosen when it starts (a port free at that moment)
 * and kept while it runs (postmaster.pid has it). TLS must pass through the
 * proxy untouched and PostgreSQL does not speak TLS over unix sockets, hence
 * a TCP port rather than a socket.
 *
 * PostgreSQL names its unix socket after the port it listens on, and the
 * agent's own connections (admission, observation, backups, samples) address
 * an instance by its published port. So the agent keeps
 * `<socketDir>/.s.PGSQL.<published>` as a symlink to the server's real socket
 * `<socketDir>/<id>/.s.PGSQL.<private>` (its own 0700 directory) while the server runs: every agent component goes on
 * connecting with (socketDir, published port), over the socket, not through
 * the proxy (its traffic is not the customer's).
 */
const socketName = (port: number) => `.s.PGSQL.${port}`;

/**
 * The published port as a rendered `dbaas.conf` records it (server-config.ts),
 * naming the instance: a restored copy carries its source's file until its
 * own first start rewrites it, and must not be taken for the source.
 */
export function publishedPortLine(id: string, port: number): string {
  return `# published port: ${port} (served by the agent's proxy for ${id})`;
}

/** The published port of instance `id`, whose `dbaas.conf` is at `confPath`, if the file was rendered for it. */
export async function publishedPortOf(confPath: string, id: string): Promise<number | undefined> {
  const m = /^# published port: (\d+) \(served by the agent's proxy for ([^)]+)\)$/m.exec(
    await readOwned(undefined, confPath).catch(() => ""),
  );
  return m && m[2] === id ? Number(m[1]) : undefined;
}

function freePrivatePort(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, address, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether `port` can be bound on the private address right now. */
function privatePortFree(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, address, () => srv.close(() => resolve(true)));
  });
}

/**
 * A private port for a server about to start: free on the private address now
 * and not the published one. `preferred` (the port the instance last used)
 * wins when it qualifies: a primary's replicas stream from its private port,
 * and every move restarts them. The server's socket is in a directory of its
 * own, so no name there can clash with another server's or the agent's links.
 */
export async function choosePrivatePort(host: Host, published: number, preferred?: { port: number }): Promise<number> {
  if (preferred && preferred.port >= 1024 && preferred.port !== published && (await privatePortFree(host.privateAddress, preferred.port)))
    return preferred.port;
  for (let i = 0; i < 20; i++) {
    const port = await freePrivatePort(host.privateAddress);
    if (port !== published) return port;
  }
  throw new Error(`no free private port for the instance published on ${published}`);
}

/** Points `.s.PGSQL.<published>` at the server's socket `<id>/.s.PGSQL.<private>` (atomically replacing an older link). */
export async function linkAgentSocket(host: Host, id: string, published: number, privatePort: number): Promise<void> {
  const link = path.join(host.socketDir, socketName(published));
  const target = path.join(path.relative(host.socketDir, host.serverSocketDir(id)), socketName(privatePort));
  try {
    const st = await lstat(link);
    if (!st.isSymbolicLink()) throw new Error(`${link} is another server's socket: port ${published} is taken on this host`);
    if ((await readlink(link)) === target) return;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  const tmp = `${link}.tmp-${process.pid}`;
  await unlink(tmp).catch(() => {});
  await symlink(target, tmp);
  await rename(tmp, link);
}

/** Removes the agent's link for a stopped server, so a later server on that private port is never reached by this name. */
export async function unlinkAgentSocket(host: Host, published: number): Promise<void> {
  const link = path.join(host.socketDir, socketName(published));
  try {
    if ((await lstat(link)).isSymbolicLink()) await unlink(link);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

/**
 * The private address and port a standby's `dbaas.conf` streams from (its `primary_conninfo`'s hostaddr and port,
 * as replication.ts's standbySettings writes them, quotes doubled), or undefined for a server that streams from none.
 */
export function streamSourceIn(conf: string): { host: string; port: number } | undefined {
  const line = /^primary_conninfo = '(.*)'$/m.exec(conf)?.[1];
  const host = line && /(?:^| )hostaddr=''([0-9A-Fa-f.:]+)''(?: |$)/.exec(line)?.[1];
  const port = line && Number(/(?:^| )port=(\d{1,5})(?: |$)/.exec(line)?.[1]);
  return host && net.isIP(host) && port && port <= 65535 ? { host, port } : undefined;
}

/**
 * Tells the guard of private ports (the nftables meter; proxy/counters.ts `guardLocal`) about instance `id`'s server,
 * before it starts or when found running: its uid reaches its own private port and, for a replica or a standby, the
 * port it streams from (`streamsFrom`); every other tenant's uid is refused on that port. The server's uid is its data
 * directory's owner, so a server from before per-server users is let through as the run-as user, to its own ports only.
 */
export async function guardPrivatePort(
  host: Host,
  id: string,
  privatePort: number,
  streamsFrom?: { host: string; port: number },
): Promise<void> {
  const user = await host.serverUser(id);
  const from = streamsFrom && net.isIP(streamsFrom.host) && streamsFrom.port > 0 ? streamsFrom : undefined;
  await host.proxy.guardLocal(id, {
    uid: user.uid,
    own: { host: host.privateAddress, port: privatePort },
    ...(from ? { streamsFrom: { host: from.host, port: from.port } } : {}),
  });
}
