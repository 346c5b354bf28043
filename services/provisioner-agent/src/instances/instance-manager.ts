import { createHash, randomBytes } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import { appendFile, chmod, chown, lstat, mkdir, open, readFile, readdir, realpath, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { findServerBinaries, type ServerBinaries } from "./binaries.ts";
import { isServerProcessIn, pidExists, processMemory, serverProcessesIn } from "./procfs.ts";
import { probeTlsLogin, tcpPortRefuses } from "./probe.ts";
import { resolveRunAs, runCommand, type RunAsIdentity } from "./run-as.ts";
import { tierSettings, isTierName, TIER_NAMES } from "./tier-settings.ts";
import { checkHostname, ensureServerCertificate, loadOrCreateCA, type AgentCA } from "./tls.ts";

/** Superuser the agent uses over the unix socket; never reachable over TCP. */
export const AGENT_SUPERUSER = "dbaas_agent";
/** The customer's role: may create databases and roles, is not superuser. */
export const ADMIN_ROLE = "dbadmin";
/** Database created for the customer in every instance. */
export const DEFAULT_DATABASE = "defaultdb";

export interface InstanceManagerOptions {
  /** Root for templates, instances, logs and the CA. Created if missing. */
  dataDir: string;
  /** Identifies this agent; goes into the CA's common name. */
  agentId: string;
  /** OS user for PostgreSQL when the agent runs as root. Default "nobody". */
  runAsUser?: string;
  /** listen_addresses for instances. Default "127.0.0.1". */
  listenAddress?: string;
  log?: (msg: string) => void;
  /** Memory scale for tier settings; default from host memory (see tier-settings). */
  memoryScale?: number;
  /**
   * syncfs after copying a template into a new instance (and fsync the
   * rename), so a host power loss cannot leave a half-written copy under the
   * final name. Off by default: it costs a filesystem flush per provision.
   * Agent crashes are covered either way; the template itself is always synced.
   */
  syncCopies?: boolean;
}

export interface ProvisionOptions {
  /** PostgreSQL major version, e.g. "17"; must be in {@link findServerBinaries}. */
  major: string;
}

export interface StartOptions {
  /** TCP port (>= 1024). */
  port: number;
  /** One of {@link TIER_NAMES}. */
  tier: string;
  /** DNS name (or IP) clients use; the server certificate covers it. */
  hostname: string;
  /** `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>` for dbadmin. */
  scramVerifier: string;
}

export type InstanceState = "absent" | "stopped" | "running" | "crashed";

export interface InstanceObservation {
  state: InstanceState;
  /** Postmaster pid (running) or the stale pid (crashed). */
  pid?: number;
  /** Port from postmaster.pid, when running. */
  port?: number;
  message?: string;
}

export interface InstanceResourceUsage {
  pids: number[];
  /** Sum of RSS; double-counts shared buffers touched by several processes. */
  rssBytes: number;
  /** Sum of PSS: shared pages split between the processes sharing them. */
  pssBytes: number;
}

/** Manages real PostgreSQL server instances under one data directory. */
export interface InstanceManager {
  /** Builds (once) and returns the path of the template data directory for `major`. */
  ensureTemplate(major: string): Promise<string>;
  /** Creates the instance's data directory from the template; no-op if it exists. */
  provision(id: string, opts: ProvisionOptions): Promise<void>;
  /**
   * Starts the instance (or re-applies password and access rules if it is
   * already running with the same settings; restarts it if settings changed).
   * Resolves once a TLS login attempt over TCP reaches password authentication.
   */
  start(id: string, opts: StartOptions): Promise<void>;
  /** Sets dbadmin's SCRAM verifier on a running instance; new logins need the new password. */
  applyPassword(id: string, scramVerifier: string): Promise<void>;
  /** Fast shutdown; resolves when the postmaster is gone and the port refuses connections. */
  stop(id: string): Promise<void>;
  /** stop() then start(). */
  restart(id: string, opts: StartOptions): Promise<void>;
  /** Resize: start() with the new tier, which restarts the instance only if settings change. */
  applyTier(id: string, opts: StartOptions): Promise<void>;
  /** Current state from the data directory, postmaster.pid, /proc and a socket query. */
  observe(id: string): Promise<InstanceObservation>;
  /** Stops the instance and deletes its data directory and log. */
  purge(id: string): Promise<void>;
  /** Ids that have a complete data directory. */
  listInstances(): Promise<string[]>;
  /** Removes `.tmp-`/`.purging-` leftovers of crashed operations; returns removed names. */
  cleanupLeftovers(): Promise<string[]>;
  /** Stops every running instance (agent shutdown). */
  stopAll(): Promise<void>;
  /** PEM of the agent CA, for clients that verify the server (sslmode=verify-full). */
  caCertificatePem(): Promise<string>;
  /** Memory of the instance's processes (for metrics). */
  resourceUsage(id: string): Promise<InstanceResourceUsage>;
  /** Server log file of an instance. */
  logPath(id: string): string;
  /** Directory holding the instances' unix sockets. */
  readonly socketDir: string;
  /** Major versions this host can run. */
  readonly availableMajors: string[];
}

/** Ids become path components and must not contain the `.` our leftovers use as a separator. */
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;
const B64 = "[A-Za-z0-9+/]+={0,2}";
const VERIFIER_RE = new RegExp(`^SCRAM-SHA-256\\$(\\d+):(${B64})\\$(${B64}):(${B64})$`);
const INCLUDE_LINE = "include_if_exists = 'dbaas.conf'";
const INCLUDE_RE = /^\s*include_if_exists\s*=\s*'dbaas\.conf'/m;
const START_TIMEOUT_S = 30;
const STOP_TIMEOUT_S = 30;

/**
 * While the instance starts, only the agent may connect: a restarted instance
 * must not accept logins before it has been given the current password.
 */
const HBA_LOCKED = `# Managed by the dbaas agent (locked during start). Do not edit.
local all ${AGENT_SUPERUSER} trust
`;
const HBA_OPEN = `# Managed by the dbaas agent. Do not edit.
local   all  ${AGENT_SUPERUSER}  trust
host    all  ${AGENT_SUPERUSER}  all        reject
hostssl all  all          0.0.0.0/0  scram-sha-256
hostssl all  all          ::/0       scram-sha-256
host    all  all          all        reject
`;

function assertId(id: string): void {
  if (!ID_RE.test(id)) throw new Error(`invalid instance id ${JSON.stringify(id)}: use 1-63 of [A-Za-z0-9_-], starting alphanumeric`);
}

/**
 * PostgreSQL stores a well-formed verifier as-is but silently hashes anything
 * else as a plaintext password, so a malformed value must never reach it.
 */
function assertVerifier(v: string): void {
  const m = VERIFIER_RE.exec(v);
  const ok =
    !!m &&
    Number(m[1]) > 0 &&
    Buffer.from(m[2]!, "base64").length > 0 &&
    Buffer.from(m[3]!, "base64").length === 32 &&
    Buffer.from(m[4]!, "base64").length === 32;
  if (!ok) throw new Error("scramVerifier must be SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> (base64, 32-byte keys)");
}

function assertStartOptions(o: StartOptions): void {
  if (!Number.isInteger(o.port) || o.port < 1024 || o.port > 65535) throw new Error(`invalid port ${o.port}: must be 1024-65535`);
  if (!isTierName(o.tier)) throw new Error(`unknown tier ${JSON.stringify(o.tier)}; expected one of ${TIER_NAMES.join(", ")}`);
  checkHostname(o.hostname);
  assertVerifier(o.scramVerifier);
}

/** postgresql.conf string literal. */
function confValue(v: string): string {
  return `'${v.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
}

function rand(): string {
  return randomBytes(4).toString("hex");
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function pathExists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

/** Makes completed renames in `dir` survive a power loss. */
async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function tail(file: string, chars = 2000): Promise<string> {
  try {
    const s = await readFile(file, "utf8");
    return s.slice(-chars).trim();
  } catch {
    return "";
  }
}

interface PidFile {
  pid: number;
  port?: number;
  socketDir?: string;
  status?: string;
}

/** postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shmem key, status. */
async function readPidFile(dataDir: string): Promise<PidFile | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(dataDir, "postmaster.pid"), "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  const lines = text.split("\n");
  const port = Number(lines[3]);
  return {
    pid: Number(lines[0]),
    port: Number.isInteger(port) && port > 0 ? port : undefined,
    socketDir: lines[4]?.split(",")[0]?.trim() || undefined,
    status: lines[7]?.trim() || undefined,
  };
}

/**
 * Creates an instance manager for the PostgreSQL instances under
 * `opts.dataDir`. Only one manager (one agent process) may own a data
 * directory at a time; within it, operations on one instance id are
 * serialized, different ids run concurrently.
 */
export function createInstanceManager(opts: InstanceManagerOptions): InstanceManager {
  const root = path.resolve(opts.dataDir);
  const templatesDir = path.join(root, "templates");
  const instancesDir = path.join(root, "instances");
  const caDir = path.join(root, "ca");
  const listenAddress = opts.listenAddress ?? "127.0.0.1";
  const log = opts.log ?? (() => {});
  const runAs: RunAsIdentity = resolveRunAs(opts.runAsUser ?? "nobody");
  const owner = { uid: runAs.uid, gid: runAs.gid };
  const binaries = findServerBinaries();
  const serverExes = new Set<string>();
  for (const b of binaries.values()) {
    try {
      serverExes.add(realpathSync(b.postgres));
    } catch {
      // unreadable binary: that version cannot run anyway
    }
  }
  const isPostmasterIn = (pid: number, realDir: string) => isServerProcessIn(pid, realDir, serverExes);
  const serverPidsIn = (realDir: string) => serverProcessesIn(realDir, serverExes);

  // Unix socket paths are limited to ~107 bytes, so sockets cannot live in
  // (possibly deep) data directories; one short directory per agent.
  let tmpBase = os.tmpdir();
  if (tmpBase.length > 60) tmpBase = "/tmp";
  const socketDir = path.join(tmpBase, `dbaas-${createHash("sha1").update(root).digest("hex").slice(0, 8)}`);
  // pg_ctl passes -o options through /bin/sh; keep the path inert.
  if (!/^[A-Za-z0-9_./-]+$/.test(socketDir)) throw new Error(`socket directory ${socketDir} contains unsafe characters; set TMPDIR`);

  // Where the readiness probe connects: a wildcard listen address is reached via loopback.
  const firstListen = listenAddress.split(",")[0]!.trim();
  const probeHost = firstListen === "*" || firstListen === "0.0.0.0" || firstListen === "" ? "127.0.0.1" : firstListen === "::" ? "::1" : firstListen;

  const chains = new Map<string, Promise<unknown>>();
  /** Temp/purging paths owned by an operation in flight; cleanup must not touch them. */
  const active = new Set<string>();
  const templateBuilds = new Map<string, Promise<string>>();
  let initPromise: Promise<void> | undefined;
  let caPromise: Promise<AgentCA> | undefined;

  function serialized<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = chains.get(id) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const settled = run.then(
      () => {},
      () => {},
    );
    chains.set(id, settled);
    void settled.then(() => {
      if (chains.get(id) === settled) chains.delete(id);
    });
    return run;
  }

  const instanceDir = (id: string) => path.join(instancesDir, id);
  const logPath = (id: string) => path.join(instancesDir, `${id}.log`);

  function binariesFor(major: string): ServerBinaries {
    const b = binaries.get(major);
    if (!b) throw new Error(`PostgreSQL ${major} is not installed; available: ${[...binaries.keys()].join(", ") || "none"}`);
    return b;
  }

  async function majorOf(dir: string): Promise<string> {
    return (await readFile(path.join(dir, "PG_VERSION"), "utf8")).trim();
  }

  /** The run-as user must be able to traverse every ancestor of its data directories. */
  async function checkTraversable(): Promise<void> {
    if (!runAs.switchUser) return;
    const rootStat = await stat(root);
    if ((rootStat.mode & 0o001) === 0) await chmod(root, (rootStat.mode & 0o7777) | 0o011);
    for (let dir = path.dirname(root); ; dir = path.dirname(dir)) {
      const st = await stat(dir);
      const ok =
        (st.mode & 0o001) !== 0 ||
        (st.uid === runAs.uid && (st.mode & 0o100) !== 0) ||
        (st.gid === runAs.gid && (st.mode & 0o010) !== 0);
      if (!ok) throw new Error(`${dir} is not traversable by ${runAs.user} (uid ${runAs.uid}); PostgreSQL could not reach ${root}`);
      if (path.dirname(dir) === dir) break;
    }
  }

  function init(): Promise<void> {
    initPromise ??= (async () => {
      await mkdir(root, { recursive: true, mode: 0o711 });
      await checkTraversable();
      // Root-owned and not listable: the run-as user only needs to traverse.
      for (const d of [templatesDir, instancesDir]) {
        await mkdir(d, { recursive: true, mode: 0o711 });
        await chmod(d, 0o711);
      }
    })().catch((e) => {
      initPromise = undefined;
      throw e;
    });
    return initPromise;
  }

  function getCA(): Promise<AgentCA> {
    caPromise ??= init()
      .then(() => loadOrCreateCA(caDir, opts.agentId))
      .catch((e) => {
        caPromise = undefined;
        throw e;
      });
    return caPromise;
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

  /** Write-then-rename so PostgreSQL never reads a half-written file, owned by the run-as user. */
  async function writeOwned(file: string, content: string, mode = 0o600): Promise<void> {
    const tmp = `${file}.tmp-${rand()}`;
    try {
      await writeFile(tmp, content, { mode });
      await chmod(tmp, mode);
      if (runAs.switchUser) await chown(tmp, owner.uid, owner.gid);
      await rename(tmp, file);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  }

  async function prepareLogFile(file: string): Promise<void> {
    await appendFile(file, "", { mode: 0o600 });
    if (runAs.switchUser) await chown(file, owner.uid, owner.gid);
  }

  async function pgCtl(bins: ServerBinaries, args: string[], timeoutMs: number) {
    return runCommand(bins.pgCtl, args, { runAs, timeoutMs });
  }

  async function withAgentClient<T>(sock: string, port: number, fn: (c: pg.Client) => Promise<T>, timeoutMs = 5000): Promise<T> {
    const client = new pg.Client({
      host: sock,
      port,
      user: AGENT_SUPERUSER,
      database: "postgres",
      ssl: false,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs * 2,
      application_name: "dbaas-agent",
    });
    // Without a listener a server-side disconnect would crash the agent.
    client.on("error", () => {});
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => {});
    }
  }

  /**
   * Kills whatever runs from a throwaway directory (a template build server
   * orphaned by an agent crash) so it can be deleted safely.
   */
  async function killProcessesIn(dir: string): Promise<void> {
    let real: string;
    try {
      real = await realpath(dir);
    } catch {
      return;
    }
    for (let i = 0; i < 50; i++) {
      const pids = serverPidsIn(real);
      if (pids.length === 0) return;
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      await sleep(20);
    }
  }

  async function removeLeftover(p: string): Promise<void> {
    await killProcessesIn(p);
    await rm(p, { recursive: true, force: true });
  }

  async function buildTemplate(major: string): Promise<string> {
    const bins = binariesFor(major);
    const final = path.join(templatesDir, major);
    if (await pathExists(path.join(final, "PG_VERSION"))) return final;
    await init();
    await ensureSocketDir();
    const started = Date.now();
    for (const name of await readdir(templatesDir)) {
      if (name.startsWith(`${major}.tmp-`)) {
        log(`template ${major}: removing leftover ${name}`);
        await removeLeftover(path.join(templatesDir, name));
      }
    }
    // Socket-only and on a port below 1024: instance ports are >= 1024, so
    // this socket name can never collide with a running instance's.
    const buildPort = 1000 + (Number(major) % 24);
    // Only builds of this major use that socket name and we hold the build,
    // so a lock file left by a killed build server is stale (and its pid may
    // linger as a zombie, which PostgreSQL would mistake for a live server).
    await rm(path.join(socketDir, `.s.PGSQL.${buildPort}.lock`), { force: true });
    await rm(path.join(socketDir, `.s.PGSQL.${buildPort}`), { force: true });
    const tmp = `${final}.tmp-${rand()}`;
    const buildLog = path.join(templatesDir, `${major}.build.log`);
    active.add(tmp);
    try {
      await mkdir(tmp, { mode: 0o700 });
      if (runAs.switchUser) await chown(tmp, owner.uid, owner.gid);
      await writeFile(buildLog, "");
      await prepareLogFile(buildLog);
      await runCommand(
        bins.initdb,
        ["-D", tmp, "-U", AGENT_SUPERUSER, "--auth-local=trust", "--auth-host=reject", "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions"],
        { runAs, timeoutMs: 120_000 },
      );
      await appendFile(
        path.join(tmp, "postgresql.conf"),
        `\n# dbaas: SCRAM only. Port, TLS and tier settings are written by the agent on every start.\npassword_encryption = 'scram-sha-256'\n${INCLUDE_LINE}\n`,
      );
      const o = `-c listen_addresses= -c unix_socket_directories=${socketDir} -c port=${buildPort} -c fsync=off`;
      try {
        await pgCtl(bins, ["-D", tmp, "-l", buildLog, "-w", "-t", String(START_TIMEOUT_S), "-o", o, "start"], (START_TIMEOUT_S + 10) * 1000);
      } catch (e) {
        throw new Error(`template ${major}: server did not start: ${errMsg(e)}\n${await tail(buildLog)}`);
      }
      try {
        await withAgentClient(socketDir, buildPort, async (c) => {
          await c.query(`CREATE ROLE ${ADMIN_ROLE} LOGIN CREATEDB CREATEROLE`);
          await c.query(`CREATE DATABASE ${DEFAULT_DATABASE} OWNER ${ADMIN_ROLE}`);
        });
      } finally {
        await pgCtl(bins, ["-D", tmp, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_S), "stop"], (STOP_TIMEOUT_S + 10) * 1000);
      }
      await rm(path.join(tmp, "postmaster.opts"), { force: true });
      // initdb ran with --no-sync and the build server with fsync=off: flush
      // once here, since every instance will be copied from this directory.
      await runCommand("sync", ["-f", tmp], { timeoutMs: 120_000 });
      await rename(tmp, final);
      await fsyncDir(templatesDir);
      log(`template ${major}: built in ${Date.now() - started} ms`);
      return final;
    } catch (e) {
      await removeLeftover(tmp).catch(() => {});
      throw e;
    } finally {
      active.delete(tmp);
    }
  }

  function ensureTemplate(major: string): Promise<string> {
    let p = templateBuilds.get(major);
    if (!p) {
      p = buildTemplate(major).finally(() => templateBuilds.delete(major));
      templateBuilds.set(major, p);
    }
    return p;
  }

  async function removeOwnLeftovers(id: string): Promise<void> {
    for (const name of await readdir(instancesDir)) {
      if (name.startsWith(`${id}.tmp-`) || name.startsWith(`${id}.purging-`)) {
        const p = path.join(instancesDir, name);
        if (!active.has(p)) await removeLeftover(p);
      }
    }
  }

  async function provisionLocked(id: string, o: ProvisionOptions): Promise<void> {
    const final = instanceDir(id);
    if (await pathExists(final)) {
      const have = await majorOf(final).catch(() => "?");
      if (have !== o.major) throw new Error(`instance ${id} already exists with PostgreSQL ${have}, not ${o.major}`);
      return;
    }
    binariesFor(o.major);
    const template = await ensureTemplate(o.major);
    await removeOwnLeftovers(id);
    const tmp = `${final}.tmp-${rand()}`;
    active.add(tmp);
    try {
      // cp -a keeps the run-as user's ownership and the 0700 mode PostgreSQL demands.
      await runCommand("cp", ["-a", "--", template, tmp], { timeoutMs: 120_000 });
      if (opts.syncCopies) await runCommand("sync", ["-f", tmp], { timeoutMs: 120_000 });
      await rename(tmp, final);
      // A durable name for non-durable contents would be worse than no name,
      // and the directory fsync costs ~100 ms (ext4 flushes the copied data).
      if (opts.syncCopies) await fsyncDir(instancesDir);
    } catch (e) {
      await rm(tmp, { recursive: true, force: true }).catch(() => {});
      throw e;
    } finally {
      active.delete(tmp);
    }
    log(`instance ${id}: provisioned (PostgreSQL ${o.major})`);
  }

  function renderConfig(o: StartOptions): string {
    const settings: Record<string, string> = {
      port: String(o.port),
      listen_addresses: listenAddress,
      unix_socket_directories: socketDir,
      // The socket grants superuser without a password (local trust), so only
      // the run-as user (and root) may open it.
      unix_socket_permissions: "0700",
      ssl: "on",
      ssl_cert_file: "server.crt",
      ssl_key_file: "server.key",
      ssl_min_protocol_version: "TLSv1.2",
      password_encryption: "scram-sha-256",
      // Hundreds of small instances: never try to reserve huge pages.
      huge_pages: "off",
      ...tierSettings(o.tier, os.totalmem(), opts.memoryScale !== undefined ? { scale: opts.memoryScale } : {}),
    };
    const lines = Object.entries(settings).map(([k, v]) => `${k} = ${confValue(v)}`);
    return `# Managed by the dbaas agent; rewritten on every start. Do not edit.\n# tier: ${o.tier}\n${lines.join("\n")}\n`;
  }

  /** Temp files of our atomic writes inside a data directory, left by a crash mid-write. */
  async function removeStaleTempFiles(dir: string): Promise<void> {
    for (const name of await readdir(dir)) {
      if (/^(?:\.server\.(?:crt|key)|\.req\.cnf|pg_hba\.conf|dbaas\.conf|postgresql\.conf)\.tmp-[0-9a-f]+$/.test(name)) {
        await rm(path.join(dir, name), { force: true });
      }
    }
  }

  async function observeLocked(id: string): Promise<InstanceObservation> {
    const dir = instanceDir(id);
    if (!(await pathExists(path.join(dir, "PG_VERSION")))) return { state: "absent" };
    const pf = await readPidFile(dir);
    if (!pf) return { state: "stopped" };
    let real: string;
    try {
      real = await realpath(dir);
    } catch {
      return { state: "absent" };
    }
    if (!isPostmasterIn(pf.pid, real)) {
      return {
        state: "crashed",
        ...(Number.isInteger(pf.pid) && pf.pid > 0 ? { pid: pf.pid } : {}),
        message: Number.isInteger(pf.pid) && pf.pid > 0 ? `stale postmaster.pid: postmaster ${pf.pid} is not running` : "unreadable postmaster.pid",
      };
    }
    const base = { pid: pf.pid, ...(pf.port ? { port: pf.port } : {}) };
    if (!pf.port || !pf.socketDir) return { state: "running", ...base, message: "postmaster is starting" };
    try {
      await withAgentClient(pf.socketDir, pf.port, (c) => c.query("SELECT 1"), 2000);
      return { state: "running", ...base };
    } catch (e) {
      return { state: "running", ...base, message: `postmaster alive but not accepting connections (${pf.status ?? "unknown status"}): ${errMsg(e)}` };
    }
  }

  /**
   * After a postmaster dies, its backends linger until they notice; a new
   * postmaster refuses to start while they still hold the old shared memory.
   */
  async function reapCrashed(id: string, removePidFile: boolean): Promise<void> {
    const dir = instanceDir(id);
    const real = await realpath(dir);
    const deadline = Date.now() + 5000;
    let pids = serverPidsIn(real);
    while (pids.length > 0 && Date.now() < deadline) {
      await sleep(25);
      pids = serverPidsIn(real);
    }
    if (pids.length > 0) {
      log(`instance ${id}: killing ${pids.length} orphaned server processes`);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone
        }
      }
      const killDeadline = Date.now() + 5000;
      while (serverPidsIn(real).length > 0 && Date.now() < killDeadline) await sleep(25);
    }
    const pf = await readPidFile(dir);
    if (!pf) return;
    // PostgreSQL treats its lock files as stale only if kill(pid, 0) fails. A
    // killed postmaster stays a zombie until init reaps it (seconds, on some
    // hosts) and its pid may be recycled; either blocks the new postmaster.
    // No process of ours runs in the directory any more, so the locks are
    // stale: remove them when PostgreSQL would not see that by itself.
    const blocking = pidExists(pf.pid);
    if ((blocking || removePidFile) && pf.port && pf.socketDir) {
      const sockLock = path.join(pf.socketDir, `.s.PGSQL.${pf.port}.lock`);
      const lockOwner = Number((await readFile(sockLock, "utf8").catch(() => "")).split("\n")[0]);
      if (lockOwner === pf.pid) {
        await unlink(path.join(pf.socketDir, `.s.PGSQL.${pf.port}`)).catch(() => {});
        await unlink(sockLock).catch(() => {});
      }
    }
    if (removePidFile || blocking) await unlink(path.join(dir, "postmaster.pid")).catch(() => {});
  }

  async function stopLocked(id: string): Promise<void> {
    const dir = instanceDir(id);
    const obs = await observeLocked(id);
    if (obs.state === "absent" || obs.state === "stopped") return;
    if (obs.state === "crashed") {
      await reapCrashed(id, true);
      log(`instance ${id}: cleaned up after crashed postmaster ${obs.pid ?? "?"}`);
      return;
    }
    const bins = binariesFor(await majorOf(dir));
    const pid = obs.pid!;
    const real = await realpath(dir);
    try {
      await pgCtl(bins, ["-D", dir, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_S), "stop"], (STOP_TIMEOUT_S + 10) * 1000);
    } catch (e) {
      log(`instance ${id}: fast stop failed (${errMsg(e)}); using immediate shutdown`);
      await pgCtl(bins, ["-D", dir, "-m", "immediate", "-w", "-t", "10", "stop"], 20_000).catch(() => {});
      if (isPostmasterIn(pid, real)) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone
        }
      }
    }
    const deadline = Date.now() + 10_000;
    while ((isPostmasterIn(pid, real) || serverPidsIn(real).length > 0) && Date.now() < deadline) await sleep(20);
    if (isPostmasterIn(pid, real)) throw new Error(`instance ${id}: postmaster ${pid} still running after stop`);
    if (obs.port) {
      while (!(await tcpPortRefuses(probeHost, obs.port, 500))) {
        if (Date.now() > deadline) throw new Error(`instance ${id}: stopped, but something still accepts connections on ${probeHost}:${obs.port}`);
        await sleep(50);
      }
    }
    log(`instance ${id}: stopped`);
  }

  /** ALTER ROLE with the verifier, then open pg_hba.conf and wait until TLS logins reach SCRAM. */
  async function admitClients(id: string, o: StartOptions, sock: string, port: number, ca: AgentCA): Promise<void> {
    const dir = instanceDir(id);
    const loadedBefore = await withAgentClient(sock, port, async (c) => {
      // Utility statements take no bind parameters; escapeLiteral quotes safely.
      await c.query(`ALTER ROLE ${ADMIN_ROLE} PASSWORD ${c.escapeLiteral(o.scramVerifier)}`);
      const r = await c.query<{ t: string }>("SELECT pg_conf_load_time()::text AS t");
      return r.rows[0]!.t;
    });
    await writeOwned(path.join(dir, "pg_hba.conf"), HBA_OPEN);
    await withAgentClient(sock, port, (c) => c.query("SELECT pg_reload_conf()"));
    // New sessions inherit the postmaster's reload time, so a changed value
    // proves the postmaster has processed the reload (and the new pg_hba.conf).
    const deadline = Date.now() + 10_000;
    for (;;) {
      const t = await withAgentClient(sock, port, async (c) => (await c.query<{ t: string }>("SELECT pg_conf_load_time()::text AS t")).rows[0]!.t);
      if (t !== loadedBefore) break;
      if (Date.now() > deadline) throw new Error(`instance ${id}: configuration reload not observed within 10 s`);
      await sleep(10);
    }
    let lastErr: unknown;
    for (;;) {
      try {
        await probeTlsLogin({ host: probeHost, port: o.port, caPem: ca.certPem, hostname: o.hostname, user: ADMIN_ROLE, database: DEFAULT_DATABASE });
        return;
      } catch (e) {
        lastErr = e;
      }
      if (Date.now() > deadline) throw new Error(`instance ${id}: not reachable over TLS on ${probeHost}:${o.port}: ${errMsg(lastErr)}`);
      await sleep(25);
    }
  }

  async function startLocked(id: string, o: StartOptions): Promise<void> {
    assertId(id);
    assertStartOptions(o);
    const dir = instanceDir(id);
    if (!(await pathExists(path.join(dir, "PG_VERSION")))) throw new Error(`instance ${id} is not provisioned`);
    const bins = binariesFor(await majorOf(dir));
    const ca = await getCA();
    await ensureSocketDir();
    const conf = renderConfig(o);
    const confPath = path.join(dir, "dbaas.conf");

    let obs = await observeLocked(id);
    if (obs.state === "running") {
      const current = await readFile(confPath, "utf8").catch(() => "");
      if (current === conf && obs.port === o.port && !obs.message) {
        await ensureServerCertificate(ca, o.hostname, dir, { owner });
        await admitClients(id, o, socketDir, o.port, ca);
        log(`instance ${id}: already running; password and access rules re-applied`);
        return;
      }
      log(`instance ${id}: settings changed; restarting`);
      await stopLocked(id);
      obs = await observeLocked(id);
    }
    if (obs.state === "crashed") {
      log(`instance ${id}: ${obs.message ?? "crashed"}; recovering`);
      await reapCrashed(id, false);
    }

    await removeStaleTempFiles(dir);
    await ensureServerCertificate(ca, o.hostname, dir, { owner });
    await writeOwned(confPath, conf);
    const pgConf = path.join(dir, "postgresql.conf");
    const pgConfText = await readFile(pgConf, "utf8");
    if (!INCLUDE_RE.test(pgConfText)) await writeOwned(pgConf, `${pgConfText}\n${INCLUDE_LINE}\n`);
    await writeOwned(path.join(dir, "pg_hba.conf"), HBA_LOCKED);
    const logFile = logPath(id);
    await prepareLogFile(logFile);
    const started = Date.now();
    try {
      await pgCtl(bins, ["-D", dir, "-l", logFile, "-w", "-t", String(START_TIMEOUT_S), "start"], (START_TIMEOUT_S + 10) * 1000);
    } catch (e) {
      throw new Error(`instance ${id}: server did not start: ${errMsg(e)}\n--- ${logFile} ---\n${await tail(logFile)}`);
    }
    await admitClients(id, o, socketDir, o.port, ca);
    log(`instance ${id}: running on port ${o.port} (tier ${o.tier}) after ${Date.now() - started} ms`);
  }

  async function applyPasswordLocked(id: string, verifier: string): Promise<void> {
    assertVerifier(verifier);
    const dir = instanceDir(id);
    const pf = await readPidFile(dir);
    const obs = await observeLocked(id);
    if (obs.state !== "running" || !pf?.port || !pf.socketDir) throw new Error(`instance ${id} is not running (${obs.state}${obs.message ? `: ${obs.message}` : ""})`);
    await withAgentClient(pf.socketDir, pf.port, (c) => c.query(`ALTER ROLE ${ADMIN_ROLE} PASSWORD ${c.escapeLiteral(verifier)}`));
    log(`instance ${id}: password updated`);
  }

  async function purgeLocked(id: string): Promise<void> {
    const dir = instanceDir(id);
    if (await pathExists(dir)) {
      await stopLocked(id);
      const doomed = `${dir}.purging-${rand()}`;
      active.add(doomed);
      try {
        await rename(dir, doomed);
        await fsyncDir(instancesDir);
        await rm(doomed, { recursive: true, force: true });
      } finally {
        active.delete(doomed);
      }
      log(`instance ${id}: purged`);
    }
    await removeOwnLeftovers(id);
    await rm(logPath(id), { force: true });
  }

  async function listInstances(): Promise<string[]> {
    await init();
    const entries = await readdir(instancesDir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && ID_RE.test(e.name)).map((e) => e.name).sort();
  }

  async function cleanupLeftovers(): Promise<string[]> {
    await init();
    const removed: string[] = [];
    for (const dir of [instancesDir, templatesDir]) {
      for (const name of await readdir(dir)) {
        const p = path.join(dir, name);
        if (!/\.(tmp|purging)-[0-9a-f]+$/.test(name) || active.has(p)) continue;
        // A leftover of an id with an operation in flight belongs to that operation's cleanup.
        if (dir === instancesDir && chains.has(name.slice(0, name.indexOf(".")))) continue;
        await removeLeftover(p);
        removed.push(name);
      }
    }
    // Logs of instances whose directory is gone (a purge interrupted at the end).
    for (const name of await readdir(instancesDir)) {
      const id = name.endsWith(".log") ? name.slice(0, -4) : undefined;
      if (!id || !ID_RE.test(id) || chains.has(id) || existsSync(instanceDir(id))) continue;
      await rm(path.join(instancesDir, name), { force: true });
      removed.push(name);
    }
    if (removed.length) log(`removed leftovers: ${removed.join(", ")}`);
    return removed;
  }

  async function stopAll(): Promise<void> {
    const ids = await listInstances();
    const errors: unknown[] = [];
    const queue = [...ids];
    const workers = Array.from({ length: Math.min(8, queue.length) }, async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        await serialized(id, () => stopLocked(id)).catch((e) => errors.push(e));
      }
    });
    await Promise.all(workers);
    if (errors.length) throw new AggregateError(errors, `stopAll: ${errors.length} instance(s) failed to stop`);
  }

  async function resourceUsage(id: string): Promise<InstanceResourceUsage> {
    assertId(id);
    let real: string;
    try {
      real = await realpath(instanceDir(id));
    } catch {
      return { pids: [], rssBytes: 0, pssBytes: 0 };
    }
    const pids = serverPidsIn(real);
    let rssBytes = 0;
    let pssBytes = 0;
    for (const pid of pids) {
      const m = processMemory(pid);
      rssBytes += m.rssBytes;
      pssBytes += m.pssBytes;
    }
    return { pids, rssBytes, pssBytes };
  }

  return {
    socketDir,
    availableMajors: [...binaries.keys()].sort(),
    logPath: (id) => {
      assertId(id);
      return logPath(id);
    },
    ensureTemplate: async (major) => {
      binariesFor(major);
      return ensureTemplate(major);
    },
    // Each call joins its instance's queue synchronously, so operations run
    // in the order they were called.
    provision: async (id, o) => {
      assertId(id);
      return serialized(id, async () => {
        await init();
        await provisionLocked(id, o);
      });
    },
    start: async (id, o) => {
      assertId(id);
      return serialized(id, async () => {
        await init();
        await startLocked(id, o);
      });
    },
    applyPassword: async (id, v) => {
      assertId(id);
      return serialized(id, () => applyPasswordLocked(id, v));
    },
    stop: async (id) => {
      assertId(id);
      return serialized(id, () => stopLocked(id));
    },
    restart: async (id, o) => {
      assertId(id);
      assertStartOptions(o);
      return serialized(id, async () => {
        await stopLocked(id);
        await startLocked(id, o);
      });
    },
    applyTier: async (id, o) => {
      assertId(id);
      return serialized(id, () => startLocked(id, o));
    },
    // Not serialized: observing must stay cheap and answer even while a slow start is in flight.
    observe: async (id) => {
      assertId(id);
      return observeLocked(id);
    },
    purge: async (id) => {
      assertId(id);
      return serialized(id, async () => {
        await init();
        await purgeLocked(id);
      });
    },
    listInstances,
    cleanupLeftovers,
    stopAll,
    caCertificatePem: async () => (await getCA()).certPem,
    resourceUsage,
  };
}
