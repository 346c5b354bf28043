import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { constants } from "node:fs";
import { chmod, mkdir, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { type AdminSessions, createAdminSessions } from "../admin-sessions.ts";
import type { ConnectionProxy } from "../proxy/counters.ts";
import { type ConnectionMeterMode, createConnectionMeter } from "../proxy/meter.ts";
import { findServerBinaries, type ServerBinaries } from "./binaries.ts";
import { chownNoFollow, openNoFollow, readOwned } from "../safe-fs.ts";
import { type InstanceCgroups, openInstanceCgroups } from "./cgroups.ts";
import { privateAddressing } from "./private-network.ts";
import { isServerProcessIn, serverProcessesIn } from "./procfs.ts";
import { resolveRunAs, type RunAsIdentity } from "./run-as.ts";
import type { Isolation } from "../runtime.ts";
import { createTenantUsers, DEFAULT_TENANT_UID_RANGE, isolationOf } from "./tenant-users.ts";
import { loadOrCreateCA, type AgentCA } from "./tls.ts";

/** Per-instance WAL spools, `<root>/wal-spool/<id>`: basic_archive writes there, the agent's archiver uploads from there. */
export const walSpoolRoot = (dataDir: string) => path.join(path.resolve(dataDir), "wal-spool");

/**
 * Per-instance server logs, `<root>/server-logs/<id>`: the server's logging collector writes its jsonlog files there
 * (owned by the server's user), the agent reads and prunes them (inside/logs.ts). Outside the data directory, so base
 * backups and replicas do not carry them.
 */
export const serverLogRoot = (dataDir: string) => path.join(path.resolve(dataDir), "server-logs");

export interface HostOptions {
  /** Root for templates, instances, logs and the CA. Created if missing. */
  dataDir: string;
  /** Identifies this agent; goes into the CA's common name. */
  agentId: string;
  /** OS user that builds the templates (initdb) when the agent runs as root. Default "nobody". */
  runAsUser?: string;
  /** AGENT_TENANT_UID_RANGE: the uids (and gids) servers get, one per database. Default 200000-299999. */
  tenantUidRange?: readonly [number, number];
  /** Where the proxy serves published ports (listen_addresses syntax). Default "127.0.0.1". */
  listenAddress?: string;
  /** The connection proxy serving the instances' published ports. Default: this host's meter of `connectionMeter`. */
  proxy?: ConnectionProxy;
  /** Without `proxy`: nftables where usable, else the proxy counting in `<dataDir>/proxy` (auto, the default), or one of them. */
  connectionMeter?: ConnectionMeterMode;
  /** AGENT_REPLICATION_SECRET: replication passwords are derived from it (instances/replication.ts). */
  replicationSecret?: string;
  /** AGENT_PRIVATE_ADDRESS: what servers listen on, for the proxy and for replicas (private-address.ts). Default 127.0.0.1. */
  privateAddress?: string;
  /** AGENT_PRIVATE_NETWORK: whom a primary lets stream (pg_hba). Default: the private address alone, if loopback. */
  privateNetwork?: string;
  /** BACKUP_ARCHIVE_TIMEOUT_S: the servers' archive_timeout in seconds. Default 30. */
  archiveTimeoutS?: number;
  /** AGENT_CGROUP_ROOT: where cgroup hierarchies are mounted (cgroups.ts). Default /sys/fs/cgroup. */
  cgroupRoot?: string;
  log?: (msg: string) => void;
}

/**
 * What every instance module needs to know about this host: where things
 * live, which server binaries exist, who PostgreSQL runs as, and which
 * processes are ours. Built once per instance manager.
 */
export interface Host {
  readonly root: string;
  readonly templatesDir: string;
  readonly instancesDir: string;
  /** Directory holding the instances' unix sockets (short: socket paths are limited to ~107 bytes). */
  readonly socketDir: string;
  /** Where published ports are served (by the proxy); instances listen on a private address (private-address.ts). */
  readonly listenAddress: string;
  /** Where readiness probes connect, as clients do: a wildcard listen address is reached via loopback. */
  readonly probeHost: string;
  /** Serves each running instance's published port and counts its bytes. */
  readonly proxy: ConnectionProxy;
  /** Who builds the templates (initdb): the run-as user as root, else the agent itself. */
  readonly runAs: RunAsIdentity;
  /** `per-tenant-uid`: every server its own uid/gid; `shared-uid`: the agent cannot switch users, servers run as it. */
  readonly isolation: Isolation;
  /** Server builds installed, by major version. */
  readonly binaries: ReadonlyMap<string, ServerBinaries>;
  readonly log: (msg: string) => void;
  /** The region's AGENT_REPLICATION_SECRET (absent: this agent's instances serve and run no replicas). */
  readonly replicationSecret?: string;
  /** The address instances listen on (the proxy forwards there, replicas stream from there). */
  readonly privateAddress: string;
  /** The CIDR replicas may stream from (pg_hba's replication line). */
  readonly privateNetwork: string;
  /** The servers' archive_timeout in seconds (server-config.ts). */
  readonly archiveTimeoutS: number;
  /** Each server's cgroup: its tier's CPU, memory and pids limits (mode "none" where the host has none to give). */
  readonly cgroups: InstanceCgroups;
  /**
   * Instances fenced now (fencing.ts): no client may connect; a start of one
   * comes up without admitting clients. In memory: after an agent restart the
   * lease keeper fences them again before anything is served.
   */
  readonly fenced: Set<string>;
  /** The agent's superuser sessions kept open on the running servers (admin-sessions.ts; admin-session.ts opens them). */
  readonly adminSessions: AdminSessions;
  instanceDir(id: string): string;
  logPath(id: string): string;
  /** The instance's WAL spool (archive_directory), outside its data directory so base backups do not carry it. */
  spoolDir(id: string): string;
  /** The instance's server log directory (log_directory), outside its data directory too. */
  serverLogDir(id: string): string;
  /** The binaries of `major`, or an error naming those installed. */
  binariesFor(major: string): ServerBinaries;
  /** PostgreSQL major of a data directory (its PG_VERSION). */
  majorOf(dir: string): Promise<string>;
  /** Whether `pid` is a live postmaster of ours running in `realDir`. */
  isPostmasterIn(pid: number, realDir: string): boolean;
  /** Every server process of ours running in `realDir`. */
  serverPidsIn(realDir: string): number[];
  /** Creates the root and its directories with the right modes (once; retried after a failure). */
  init(): Promise<void>;
  /** Creates the socket directory, or checks that the one found is ours. */
  ensureSocketDir(): Promise<void>;
  /** The agent CA, loaded or created on first use. */
  ca(): Promise<AgentCA>;
  /** The OS user instance `id`'s server runs as: its data directory's owner (shared-uid: the agent). */
  serverUser(id: string): Promise<RunAsIdentity>;
  /**
   * Creates `dir` (mode 0700) owned by a uid/gid of the range no instance
   * directory (complete or in the making) has: a new server's user, kept with
   * its data from then on. Shared-uid: the agent's own.
   */
  makeServerDir(dir: string): Promise<RunAsIdentity>;
  /**
   * A server from before per-server users (its data directory owned by the run-as user) gets a uid of the range of
   * its own: its data directory, WAL spool, socket directory and log are chowned to it (tenant-users.ts giveOwnUser).
   * Only for a server that is not running. Resolves true if it did, false if the server has its own user already (or
   * the agent cannot switch users).
   */
  ownServerUser(id: string): Promise<boolean>;
  /** The directory of `id`'s server's unix socket: `<socketDir>/<id>`, 0700, owned by its user. */
  serverSocketDir(id: string): string;
  /** Creates {@link serverSocketDir} for `user`, or gives the one found to it. */
  ensureServerSocketDir(id: string, user: RunAsIdentity): Promise<void>;
  /** Creates {@link serverLogDir} (0700) for `user`, or gives the one found to it. */
  ensureServerLogDir(id: string, user: RunAsIdentity): Promise<void>;
}

export function createHost(opts: HostOptions): Host {
  const root = path.resolve(opts.dataDir);
  const templatesDir = path.join(root, "templates");
  const instancesDir = path.join(root, "instances");
  const caDir = path.join(root, "ca");
  const listenAddress = opts.listenAddress ?? "127.0.0.1";
  const privateAddr = privateAddressing(opts.privateAddress, opts.privateNetwork);
  const runAs = resolveRunAs(opts.runAsUser ?? "nobody");
  const isolation = isolationOf();
  const binaries = findServerBinaries();
  const serverExes = new Set<string>();
  for (const b of binaries.values()) {
    try {
      serverExes.add(realpathSync(b.postgres));
    } catch {
      // unreadable binary: that version cannot run anyway
    }
  }

  // Unix socket paths are limited to ~107 bytes, so sockets cannot live in
  // (possibly deep) data directories; one short directory per agent.
  let tmpBase = os.tmpdir();
  if (tmpBase.length > 60) tmpBase = "/tmp";
  const socketDir = path.join(tmpBase, `dbaas-${createHash("sha1").update(root).digest("hex").slice(0, 8)}`);
  // pg_ctl passes -o options through /bin/sh; keep the path inert.
  if (!/^[A-Za-z0-9_./-]+$/.test(socketDir)) throw new Error(`socket directory ${socketDir} contains unsafe characters; set TMPDIR`);

  const firstListen = listenAddress.split(",")[0]!.trim();
  const probeHost =
    firstListen === "*" || firstListen === "0.0.0.0" || firstListen === "" ? "127.0.0.1" : firstListen === "::" ? "::1" : firstListen;

  const log = opts.log ?? (() => {});
  const tenantUidRange = opts.tenantUidRange ?? DEFAULT_TENANT_UID_RANGE;
  const proxy =
    opts.proxy ??
    createConnectionMeter({
      mode: opts.connectionMeter ?? "auto",
      dataDir: root,
      agentId: opts.agentId,
      listenAddress,
      privateAddress: privateAddr.address,
      privateNetwork: privateAddr.network,
      // The servers' own connections (a replica's to its primary) are let through per port: guardLocal.
      log,
    });

  const tenants = createTenantUsers({
    isolation,
    range: tenantUidRange,
    instancesDir,
    agent: runAs,
  });
  const cgroups = openInstanceCgroups({ ...(opts.cgroupRoot ? { root: opts.cgroupRoot } : {}), dataDir: root, agentId: opts.agentId });
  log(
    cgroups.mode === "none"
      ? `resource limits: none (${cgroups.reason}); servers run without CPU, memory and pids limits`
      : `resource limits: a cgroup ${cgroups.mode} per server (the tier's CPU quota, memory and a pids limit)`,
  );

  let initPromise: Promise<void> | undefined;
  let caPromise: Promise<AgentCA> | undefined;

  /** The servers' users must be able to traverse every ancestor of their data directories. */
  async function checkTraversable(): Promise<void> {
    if (!runAs.switchUser && isolation === "shared-uid") return;
    const rootStat = await stat(root);
    if ((rootStat.mode & 0o001) === 0) await chmod(root, (rootStat.mode & 0o7777) | 0o011);
    for (let dir = path.dirname(root); ; dir = path.dirname(dir)) {
      const st = await stat(dir);
      // Tenant users own nothing above their directories: only the "other" bit lets them through.
      const ok =
        (st.mode & 0o001) !== 0 ||
        (isolation === "shared-uid" &&
          ((st.uid === runAs.uid && (st.mode & 0o100) !== 0) || (st.gid === runAs.gid && (st.mode & 0o010) !== 0)));
      if (!ok) throw new Error(`${dir} is not traversable by the servers' users; PostgreSQL could not reach ${root}`);
      if (path.dirname(dir) === dir) break;
    }
  }

  function init(): Promise<void> {
    initPromise ??= (async () => {
      await mkdir(root, { recursive: true, mode: 0o711 });
      await checkTraversable();
      // Root-owned and not listable: the run-as user only needs to traverse.
      for (const d of [templatesDir, instancesDir, walSpoolRoot(root), serverLogRoot(root)]) {
        await mkdir(d, { recursive: true, mode: 0o711 });
        await chmod(d, 0o711);
      }
    })().catch((e) => {
      initPromise = undefined;
      throw e;
    });
    return initPromise;
  }

  /**
   * The socket directory sits in world-writable /tmp, so refuse one that
   * someone else created (it would let them intercept or read our sockets).
   * The agent's (0711: servers traverse it to their own directories, nobody
   * lists it); it holds the agent's links and one 0700 directory per server.
   */
  async function ensureSocketDir(): Promise<void> {
    try {
      await mkdir(socketDir, { mode: 0o711 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    // Changed on an O_NOFOLLOW descriptor: in /tmp, a link in its place must never be chowned or chmodded through.
    const fh = await openNoFollow(socketDir, constants.O_RDONLY | constants.O_DIRECTORY, "the socket directory");
    try {
      const st = await fh.stat();
      const myUid = process.getuid!();
      if (st.uid !== myUid) {
        // An agent from before per-server directories left it owned by the run-as user.
        if (st.uid !== runAs.uid) throw new Error(`${socketDir} is owned by uid ${st.uid}, expected ${myUid}; remove it`);
        await fh.chown(myUid, process.getgid!());
      }
      if ((st.mode & 0o777) !== 0o711) await fh.chmod(0o711);
    } finally {
      await fh.close();
    }
  }

  const serverSocketDir = (id: string) => path.join(socketDir, id);

  return {
    root,
    templatesDir,
    instancesDir,
    socketDir,
    listenAddress,
    probeHost,
    proxy,
    runAs,
    isolation,
    binaries,
    log,
    ...(opts.replicationSecret ? { replicationSecret: opts.replicationSecret } : {}),
    privateAddress: privateAddr.address,
    privateNetwork: privateAddr.network,
    archiveTimeoutS: opts.archiveTimeoutS ?? 30,
    cgroups,
    adminSessions: createAdminSessions(),
    fenced: new Set(),
    instanceDir: (id) => path.join(instancesDir, id),
    logPath: (id) => path.join(instancesDir, `${id}.log`),
    spoolDir: (id) => path.join(walSpoolRoot(root), id),
    serverLogDir: (id) => path.join(serverLogRoot(root), id),
    binariesFor(major) {
      const b = binaries.get(major);
      if (!b) throw new Error(`PostgreSQL ${major} is not installed; available: ${[...binaries.keys()].join(", ") || "none"}`);
      return b;
    },
    // Not through a link: the answer can end up in a message the customer sees.
    majorOf: async (dir) => (await readOwned(undefined, path.join(dir, "PG_VERSION"))).trim(),
    isPostmasterIn: (pid, realDir) => isServerProcessIn(pid, realDir, serverExes),
    serverPidsIn: (realDir) => serverProcessesIn(realDir, serverExes),
    init,
    ensureSocketDir,
    serverUser: (id) => tenants.userOf(path.join(instancesDir, id)),
    makeServerDir: (dir) => tenants.makeDir(dir),
    async ownServerUser(id) {
      const dir = path.join(instancesDir, id);
      const before = (await stat(dir)).uid;
      if (!(await tenants.needsOwnUser(dir))) return false;
      const logFile = path.join(instancesDir, `${id}.log`);
      const user = await tenants.giveOwnUser(dir, [
        path.join(walSpoolRoot(root), id),
        serverSocketDir(id),
        logFile,
        path.join(serverLogRoot(root), id),
      ]);
      await chownNoFollow(logFile, user, 0o600).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== "ENOENT") throw e;
      });
      log(
        before === runAs.uid
          ? `instance ${id}: its server ran as the shared user ${runAs.user}; it now runs as uid ${user.uid} of its own (its files chowned)`
          : `instance ${id}: its server ran as uid ${before}, outside AGENT_TENANT_UID_RANGE; it now runs as uid ${user.uid} of the range (its files chowned)`,
      );
      return true;
    },
    serverSocketDir,
    async ensureServerSocketDir(id, user) {
      await ensureSocketDir();
      await tenants.ensureOwnedDir(serverSocketDir(id), user);
    },
    async ensureServerLogDir(id, user) {
      await init();
      await tenants.ensureOwnedDir(path.join(serverLogRoot(root), id), user);
    },
    ca() {
      caPromise ??= init()
        .then(() => loadOrCreateCA(caDir, opts.agentId))
        .catch((e) => {
          caPromise = undefined;
          throw e;
        });
      return caPromise;
    },
  };
}
