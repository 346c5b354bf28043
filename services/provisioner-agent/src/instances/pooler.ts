import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { PoolerSettings, PoolerStatus } from "../runtime.ts";
import type { CgroupLimits } from "./cgroups.ts";
import { ADMIN_ROLE } from "./agent-socket.ts";
import { ensureOwnedDir, pathExists, readOwned, removeTree, tail, writeOwned } from "./files.ts";
import type { Host } from "./host.ts";
import { readPidFile } from "./observe.ts";
import { poolerProcessesBelow, processRunning } from "./procfs.ts";
import { runCommand, type RunAsIdentity } from "./run-as.ts";
import { ensureServerCertificate } from "./tls.ts";

/*
 * A PgBouncer per database (docs/product.md, Trusted sources and connection pooling): Debian's
 * pgbouncer, run as the database's server user from `<root>/poolers/<id>/` (0700: its ini, its
 * auth file holding the dbadmin SCRAM verifier, its certificate for `<id>-pooler.<domain>` from the
 * agent's CA, pid file and log). It listens on a private port of the private address; the meter
 * publishes it (the database's port plus AGENT_POOLER_PORT_OFFSET) as a route accounted to the
 * database, so its bytes count as the database's transfer and its trusted sources apply. It reaches
 * the server over the server's own unix socket, logging in with SCRAM pass-through: a client that
 * proved the password against the verifier in the auth file lets PgBouncer prove it to the server
 * too (the server holds the same verifier), so no password is kept anywhere (docs/decisions.md).
 *
 * It runs daemonized (`-d`): a kill -9 of the agent leaves it serving, and the next agent finds it
 * by its pid file (or, the pid file lost, by its ini on its command line in /proc) and keeps it. A
 * kill -9 of PgBouncer is noticed by the agent's next pass (every 2 s) and it is started again. A
 * stop ends every PgBouncer of the directory, the agent's shutdown every one below its poolers' root.
 */

const PID_FILE = "pgbouncer.pid";
const INI = "pgbouncer.ini";
const AUTH_FILE = "userlist.txt";
const PORT_FILE = "port";
/** PgBouncer needs a descriptor per client and per server connection: 1,000 clients need more than a 1,024 default. */
const MIN_OPEN_FILES = 4096;

/**
 * A pooler's cgroup (cgroups.ts), `<id>-pooler` beside its server's: PgBouncer is one thread, so one CPU
 * (at a default process's weight); 256 MiB holds 1,000 clients' buffers (two 4 KiB packet buffers and
 * ~20 KiB of state each, measured in bench:edge) many times over; a handful of pids (it does not fork
 * after daemonizing). Its own and not the server's: the server's cgroup is removed when the server stops,
 * which a PgBouncer inside it would block, and a pooler's share is not taken from the tenant's vCPUs.
 */
export const POOLER_LIMITS: CgroupLimits = {
  cpuQuotaUs: 100_000,
  cpuPeriodUs: 100_000,
  cpuWeight: 100,
  memoryBytes: 256 * 1024 * 1024,
  pids: 16,
};
const cgroupOf = (id: string) => `${id}-pooler`;

/** Whether `pgbouncer` runs here, and why not. */
export function poolerSupport(pgbouncerPath: string): { available: boolean; reason: string } {
  try {
    const out = execFileSync(pgbouncerPath, ["--version"], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "pipe"] });
    const version = /PgBouncer (\d+\.\d+)/.exec(out)?.[1];
    if (!version) return { available: false, reason: `${pgbouncerPath} --version did not say it is PgBouncer` };
    return { available: true, reason: `PgBouncer ${version}` };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return {
      available: false,
      reason:
        code === "ENOENT"
          ? `PgBouncer is not installed on this host (${pgbouncerPath})`
          : `${pgbouncerPath} cannot run: ${(e as Error).message}`,
    };
  }
}

export function renderPoolerIni(o: {
  dir: string;
  listenAddress: string;
  listenPort: number;
  serverSocketDir: string;
  serverPort: number;
  settings: PoolerSettings;
}): string {
  const s = o.settings;
  return `; Managed by the dbaas agent. Do not edit.
[databases]
* = host=${o.serverSocketDir} port=${o.serverPort}

[pgbouncer]
listen_addr = ${o.listenAddress}
listen_port = ${o.listenPort}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = ${path.join(o.dir, AUTH_FILE)}
pool_mode = ${s.mode}
default_pool_size = ${s.poolSize}
max_db_connections = ${s.poolSize}
max_client_conn = ${s.maxClientConnections}
client_tls_sslmode = require
client_tls_key_file = ${path.join(o.dir, "server.key")}
client_tls_cert_file = ${path.join(o.dir, "server.crt")}
client_tls_protocols = secure
server_tls_sslmode = disable
server_reset_query = DISCARD ALL
server_idle_timeout = 600
ignore_startup_parameters = extra_float_digits
pidfile = ${path.join(o.dir, PID_FILE)}
logfile = ${path.join(o.dir, "pgbouncer.log")}
log_connections = 0
log_disconnections = 0
`;
}

/** PgBouncer's auth file: the role's SCRAM verifier, never a password. */
export function renderAuthFile(scramVerifier: string): string {
  if (!/^SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/.test(scramVerifier)) {
    throw new Error("the pooler's auth file takes a SCRAM-SHA-256 verifier only");
  }
  return `"${ADMIN_ROLE}" "${scramVerifier}"\n`;
}

export interface Poolers {
  /** Makes instance `id`'s pooler run with `settings` (undefined: stopped, its port unpublished); see InstanceRuntime.syncPooler. */
  sync(id: string, settings: PoolerSettings | undefined): Promise<PoolerStatus>;
  /** Stops it and removes its directory (a purged database). */
  remove(id: string): Promise<void>;
  /** Ids with a pooler directory. */
  list(): Promise<string[]>;
  /** Stops every pooler (agent shutdown: they stop with the instances). */
  stopAll(): Promise<void>;
}

const routeId = (id: string) => `${id}-pooler`;

export function createPoolers(host: Host, pgbouncerPath: string): Poolers {
  const root = path.join(host.root, "poolers");
  const dirOf = (id: string) => path.join(root, id);
  /** What each running pooler was last given (ini and auth file): a change reloads it. */
  const applied = new Map<string, string>();

  /**
   * Ids whose PgBouncer is known to be gone (stopped, or looked for and not found) since this agent last started
   * one: a stopped database's pass then costs no /proc scan, every 2 s.
   */
  const gone = new Set<string>();

  /** The pid in the pid file when that process is a pgbouncer of this directory's ini. */
  async function pidFilePid(id: string): Promise<number | undefined> {
    let pid: number;
    try {
      pid = Number((await readOwned(undefined, path.join(dirOf(id), PID_FILE))).trim());
    } catch {
      return undefined;
    }
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (/^\d+ \(.*\) Z/.test(stat)) return undefined;
      return cmd.some((a) => a.endsWith("pgbouncer")) && cmd.includes(path.join(dirOf(id), INI)) ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * This directory's running PgBouncer: the pid file's, else one found in /proc by its ini (a pid file lost while
   * its process ran, or one not written yet by a daemon just forked): adopted, never started a second time beside it.
   */
  async function runningPid(id: string): Promise<number | undefined> {
    const pid = await pidFilePid(id);
    if (pid !== undefined || gone.has(id)) return pid;
    const found = poolerProcessesBelow(dirOf(id))[0];
    if (found === undefined) gone.add(id);
    return found;
  }

  async function stop(id: string): Promise<void> {
    applied.delete(id);
    await host.proxy.unserve(routeId(id));
    // The pid file's and any other PgBouncer of this directory (its pid file lost): none outlives its database.
    const pids = [...new Set([await pidFilePid(id), ...(gone.has(id) ? [] : poolerProcessesBelow(dirOf(id)))])].filter(
      (p): p is number => p !== undefined,
    );
    // SIGTERM: PgBouncer's immediate shutdown (clients are cut, as when the server stops).
    await terminate(pids);
    gone.add(id);
    await removeCgroup(id);
  }

  /** The pooler's cgroup goes once its process has left it (an exiting one may hold it a moment). */
  async function removeCgroup(id: string): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        const kept = await host.cgroups.remove(cgroupOf(id));
        if (kept.length) host.log(`pooler of ${id}: its cgroup stays: process(es) ${kept.join(", ")} still in it`);
        return;
      } catch (e) {
        if (i >= 40) return host.log(`pooler of ${id}: its cgroup was not removed: ${(e as Error).message}`);
        await sleep(50);
      }
    }
  }

  /** A private port for the pooler: the one it had while free, else one the kernel picks now. */
  async function privatePort(id: string, running: boolean): Promise<number> {
    const file = path.join(dirOf(id), PORT_FILE);
    const kept = Number((await readOwned(undefined, file).catch(() => "")).trim());
    if (Number.isInteger(kept) && kept >= 1024 && (running || (await portFree(host.privateAddress, kept)))) return kept;
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once("error", reject);
      srv.listen({ host: host.privateAddress, port: 0 }, () => {
        const p = (srv.address() as net.AddressInfo).port;
        srv.close(() => resolve(p));
      });
    });
    return port;
  }

  async function start(id: string, user: RunAsIdentity, port: number): Promise<number> {
    const ini = path.join(dirOf(id), INI);
    gone.delete(id);
    // A pid file of a dead PgBouncer (killed -9; a zombie no one reaped yet still answers kill 0) would stop the new one.
    await rm(path.join(dirOf(id), PID_FILE), { force: true });
    await host.cgroups.apply(cgroupOf(id), POOLER_LIMITS);
    // Raise the open-files limit where the hard limit allows (exec keeps the pid file's process the pgbouncer).
    await runCommand(
      "/bin/sh",
      ["-c", `[ "$(ulimit -n)" -lt ${MIN_OPEN_FILES} ] && ulimit -n ${MIN_OPEN_FILES} 2>/dev/null; exec "$0" -d "$1"`, pgbouncerPath, ini],
      // In its cgroup before it execs: the daemon it forks is there too.
      { runAs: user, timeoutMs: 30_000, beforeExec: (pid) => host.cgroups.attach(cgroupOf(id), pid) },
    );
    const deadline = Date.now() + 15_000;
    for (;;) {
      // Its pid file: written by the daemon itself, never the parent that forked it and exits.
      const pid = await pidFilePid(id);
      if (pid !== undefined && (await accepts(host.privateAddress, port))) return pid;
      if (Date.now() > deadline) {
        const log = await tail(path.join(dirOf(id), "pgbouncer.log"), 1000);
        throw new Error(`the pooler of ${id} did not start listening on ${host.privateAddress}:${port}${log ? `: ${log}` : ""}`);
      }
      await sleep(100);
    }
  }

  return {
    async sync(id, settings) {
      if (!settings) {
        await stop(id);
        return { running: false };
      }
      const pf = await readPidFile(host.instanceDir(id), host.serverSocketDir(id));
      if (!pf?.port || !pf.socketDir) {
        await stop(id);
        return { running: false, message: "its server is not running" };
      }
      const user = await host.serverUser(id);
      const dir = dirOf(id);
      await mkdir(root, { recursive: true, mode: 0o711 });
      await ensureOwnedDir(dir, user);
      const certChanged = await ensureServerCertificate(await host.ca(), settings.host, dir, { owner: user });
      let pid = await runningPid(id);
      const port = await privatePort(id, pid !== undefined);
      const ini = renderPoolerIni({
        dir,
        listenAddress: host.privateAddress,
        listenPort: port,
        serverSocketDir: pf.socketDir,
        serverPort: pf.port,
        settings,
      });
      const auth = renderAuthFile(settings.scramVerifier);
      const wanted = `${ini}\0${auth}`;
      if (applied.get(id) !== wanted || pid === undefined) {
        const onDisk = await Promise.all([INI, AUTH_FILE].map((f) => readOwned(user, path.join(dir, f)).catch(() => "")));
        if (onDisk[0] !== ini || onDisk[1] !== auth) {
          await writeOwned(user, path.join(dir, AUTH_FILE), auth);
          await writeOwned(user, path.join(dir, INI), ini);
          await writeOwned(user, path.join(dir, PORT_FILE), `${port}\n`);
          if (pid !== undefined && certChanged) {
            await stop(id);
            pid = undefined;
          } else if (pid !== undefined) {
            // Mode, pool size, the verifier after a password reset, a server restarted on another port: a reload.
            process.kill(pid, "SIGHUP");
          }
        }
        if (pid === undefined) pid = await start(id, user, port);
        applied.set(id, wanted);
      }
      await host.proxy.serve(routeId(id), { port: settings.port, target: { host: host.privateAddress, port }, account: id });
      return { running: true, pid };
    },
    async remove(id) {
      await stop(id);
      await removeTree(dirOf(id));
    },
    async list() {
      if (!(await pathExists(root))) return [];
      return (await readdir(root)).sort();
    },
    async stopAll() {
      for (const id of await this.list()) await stop(id).catch(() => {});
      // And any PgBouncer below the poolers' root whose directory is gone (or was never listed): the agent leaves none.
      await terminate(poolerProcessesBelow(root));
    },
  };
}

/** SIGTERM to each of `pids`, SIGKILL to those still running after 5 s; resolves when all are gone (or 10 s passed). */
async function terminate(pids: number[]): Promise<void> {
  const signal = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {
      // gone meanwhile
    }
  };
  for (const pid of pids) signal(pid, "SIGTERM");
  let left = pids;
  for (let i = 0; i < 100 && left.length > 0; i++) {
    await sleep(50);
    left = left.filter(processRunning);
  }
  for (const pid of left) signal(pid, "SIGKILL");
  for (let i = 0; i < 100 && left.length > 0; i++) {
    await sleep(50);
    left = left.filter(processRunning);
  }
}

function portFree(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen({ host: address, port }, () => srv.close(() => resolve(true)));
  });
}

function accepts(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: address, port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}
