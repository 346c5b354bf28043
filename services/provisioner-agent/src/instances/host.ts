import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { chmod, chown, lstat, mkdir, readFile, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ConnectionProxy } from "../proxy/counters.ts";
import { type ConnectionMeterMode, createConnectionMeter } from "../proxy/meter.ts";
import { findServerBinaries, type ServerBinaries } from "./binaries.ts";
import { privateAddressing } from "./private-network.ts";
import { isServerProcessIn, serverProcessesIn } from "./procfs.ts";
import { resolveRunAs, type RunAsIdentity } from "./run-as.ts";
import { loadOrCreateCA, type AgentCA } from "./tls.ts";

/** Per-instance WAL spools, `<root>/wal-spool/<id>`: basic_archive writes there, the agent's archiver uploads from there. */
export const walSpoolRoot = (dataDir: string) => path.join(path.resolve(dataDir), "wal-spool");

export interface HostOptions {
  /** Root for templates, instances, logs and the CA. Created if missing. */
  dataDir: string;
  /** Identifies this agent; goes into the CA's common name. */
  agentId: string;
  /** OS user for PostgreSQL when the agent runs as root. Default "nobody". */
  runAsUser?: string;
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
  readonly runAs: RunAsIdentity;
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
  instanceDir(id: string): string;
  logPath(id: string): string;
  /** The instance's WAL spool (archive_directory), outside its data directory so base backups do not carry it. */
  spoolDir(id: string): string;
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
}

export function createHost(opts: HostOptions): Host {
  const root = path.resolve(opts.dataDir);
  const templatesDir = path.join(root, "templates");
  const instancesDir = path.join(root, "instances");
  const caDir = path.join(root, "ca");
  const listenAddress = opts.listenAddress ?? "127.0.0.1";
  const privateAddr = privateAddressing(opts.privateAddress, opts.privateNetwork);
  const runAs = resolveRunAs(opts.runAsUser ?? "nobody");
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
  const proxy =
    opts.proxy ??
    createConnectionMeter({
      mode: opts.connectionMeter ?? "auto",
      dataDir: root,
      agentId: opts.agentId,
      listenAddress,
      privateAddress: privateAddr.address,
      log,
    });

  let initPromise: Promise<void> | undefined;
  let caPromise: Promise<AgentCA> | undefined;

  /** The run-as user must be able to traverse every ancestor of its data directories. */
  async function checkTraversable(): Promise<void> {
    if (!runAs.switchUser) return;
    const rootStat = await stat(root);
    if ((rootStat.mode & 0o001) === 0) await chmod(root, (rootStat.mode & 0o7777) | 0o011);
    for (let dir = path.dirname(root); ; dir = path.dirname(dir)) {
      const st = await stat(dir);
      const ok =
        (st.mode & 0o001) !== 0 || (st.uid === runAs.uid && (st.mode & 0o100) !== 0) || (st.gid === runAs.gid && (st.mode & 0o010) !== 0);
      if (!ok) throw new Error(`${dir} is not traversable by ${runAs.user} (uid ${runAs.uid}); PostgreSQL could not reach ${root}`);
      if (path.dirname(dir) === dir) break;
    }
  }

  function init(): Promise<void> {
    initPromise ??= (async () => {
      await mkdir(root, { recursive: true, mode: 0o711 });
      await checkTraversable();
      // Root-owned and not listable: the run-as user only needs to traverse.
      for (const d of [templatesDir, instancesDir, walSpoolRoot(root)]) {
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
   */
  async function ensureSocketDir(): Promise<void> {
    try {
      await mkdir(socketDir, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const st = await lstat(socketDir);
    if (!st.isDirectory()) throw new Error(`${socketDir} exists and is not a directory`);
    const myUid = process.getuid!();
    if (st.uid !== runAs.uid) {
      if (st.uid !== myUid) throw new Error(`${socketDir} is owned by uid ${st.uid}, expected ${runAs.uid}; remove it`);
      await chown(socketDir, runAs.uid, runAs.gid);
    }
    if ((st.mode & 0o777) !== 0o700) await chmod(socketDir, 0o700);
  }

  return {
    root,
    templatesDir,
    instancesDir,
    socketDir,
    listenAddress,
    probeHost,
    proxy,
    runAs,
    binaries,
    log,
    ...(opts.replicationSecret ? { replicationSecret: opts.replicationSecret } : {}),
    privateAddress: privateAddr.address,
    privateNetwork: privateAddr.network,
    archiveTimeoutS: opts.archiveTimeoutS ?? 30,
    instanceDir: (id) => path.join(instancesDir, id),
    logPath: (id) => path.join(instancesDir, `${id}.log`),
    spoolDir: (id) => path.join(walSpoolRoot(root), id),
    binariesFor(major) {
      const b = binaries.get(major);
      if (!b) throw new Error(`PostgreSQL ${major} is not installed; available: ${[...binaries.keys()].join(", ") || "none"}`);
      return b;
    },
    majorOf: async (dir) => (await readFile(path.join(dir, "PG_VERSION"), "utf8")).trim(),
    isPostmasterIn: (pid, realDir) => isServerProcessIn(pid, realDir, serverExes),
    serverPidsIn: (realDir) => serverProcessesIn(realDir, serverExes),
    init,
    ensureSocketDir,
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
