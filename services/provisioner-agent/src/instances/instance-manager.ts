import path from "node:path";
import type pg from "pg";
import type { BlobStore } from "../backups/blob-store.ts";
import type { AdminSessionOptions, AgentConnection, ServerFiles, ServerLog, ServerUsage } from "../instance-access.ts";
import type { ConnectionProxy } from "../proxy/counters.ts";
import type {
  HeldSlotPosition,
  InstanceSettings,
  Isolation,
  PoolerSettings,
  PoolerStatus,
  RestoreRequest,
  RuntimeObservation,
  SeedRequest,
} from "../runtime.ts";
import { adminSession, agentConnectionOf } from "./admin-session.ts";
import { setPassword } from "./admission.ts";
import { withAgentClient } from "./agent-socket.ts";
import type { CgroupMode, CgroupStats } from "./cgroups.ts";
import { createDataDirs } from "./data-dirs.ts";
import { applySynchronousStandbys, fenceInstance, unfenceInstance } from "./fencing.ts";
import { readOwned, serverFilesOf, writeOwned } from "./files.ts";
import { createHost, type HostOptions, walSpoolRoot } from "./host.ts";
import { observeInstance, resourceUsage, type InstanceResourceUsage } from "./observe.ts";
import { createPoolers, poolerSupport as createPoolerSupport } from "./pooler.ts";
import { applyParameters } from "./parameters.ts";
import { publishedPortOf } from "./private-address.ts";
import { adoptReplica, resumeServing, startInstance, stopInstance } from "./process-control.ts";
import { ensureReplicationRole, holdSlots, removeReplicaFiles, syncSlots } from "./replication.ts";
import { configPath, logQuotaBytes, READ_ONLY_CONF, renderReadOnlyConf } from "./server-config.ts";
import { createSerializer } from "./serial.ts";
import { serverUsage } from "./usage.ts";
import { assertId, assertSettings, assertSynchronousStandbyNames } from "./validate.ts";

export interface ProvisionOptions {
  /** PostgreSQL major version, e.g. "17"; must be one of {@link InstanceManager.availableMajors}. */
  major: string;
  /** Create from another database's backups (point-in-time restore) instead of the template. */
  restore?: RestoreRequest;
  /** Create a read replica from its primary's base backup instead of the template. */
  seed?: SeedRequest;
}

export interface InstanceManagerOptions extends HostOptions {
  /** The blob store restores fetch base backups and WAL from. */
  store?: BlobStore;
  /** PGBOUNCER_PATH: the poolers' program (pooler.ts); without it, or where it does not run, no poolers. */
  pgbouncerPath?: string;
}

/**
 * Real PostgreSQL server instances under one data directory: the machinery
 * behind the local-process runtime (local-runtime.ts), which is what the
 * reconciler sees. Its parts: host.ts (paths, binaries, run-as user, CA),
 * serial.ts (one operation per instance at a time), data-dirs.ts (templates,
 * copies, purges, leftovers) on files.ts (atomic writes), process-control.ts
 * (start, stop, crash reaping), server-config.ts (postgresql.conf, pg_hba),
 * admission.ts (password and TLS admission), observe.ts (observation),
 * private-address.ts (where a server listens behind the proxy).
 */
export interface InstanceManager {
  /** The databases' PgBouncers (pooler.ts), where PGBOUNCER_PATH runs. */
  readonly poolerSupport: { available: boolean; reason: string };
  syncPooler(id: string, settings: PoolerSettings | undefined): Promise<PoolerStatus>;
  listPoolers(): Promise<string[]>;
  removePooler(id: string): Promise<void>;
  /** Builds (once) and returns the path of the template data directory for `major`. */
  ensureTemplate(major: string): Promise<string>;
  /** Creates the instance's data directory from the template (or a source's backups); no-op if it exists. */
  provision(id: string, opts: ProvisionOptions): Promise<void>;
  /**
   * Starts the instance (or re-applies password and access rules if it is
   * already running with the same settings; restarts it if settings changed).
   * Resolves once a TLS login attempt over TCP reaches password authentication.
   */
  start(id: string, opts: InstanceSettings): Promise<void>;
  /** Moves a promoted replica's data to `id` (promoting and stopping it first); see process-control's adoptReplica. */
  adopt(id: string, replicaId: string): Promise<void>;
  /** Creates missing and drops unlisted `dbaas_` replication slots of a running primary (and makes its replication role current). */
  syncReplicationSlots(id: string, slots: readonly string[]): Promise<void>;
  /** Holds a running standby's slots for the other members of its primary (replication.ts, holdSlots). Takes no turn. */
  holdStandbySlots(id: string, slots: readonly HeldSlotPosition[]): Promise<void>;
  /** Fences the instance (fencing.ts): no client sessions, now and after any start, until unfenced. Takes no turn. */
  fence(id: string): Promise<void>;
  /** Lets clients in again. Takes no turn. */
  unfence(id: string): Promise<void>;
  isFenced(id: string): boolean;
  /** A running primary's synchronous_standby_names, by a reload. Takes no turn. */
  setSynchronousStandbys(id: string, names: string): Promise<void>;
  /** Sets dbadmin's SCRAM verifier on a running instance; new logins need the new password. */
  applyPassword(id: string, scramVerifier: string): Promise<void>;
  /** `default_transaction_read_only` on (storage full) or off, by ALTER SYSTEM and a reload, on a running instance. */
  applyReadOnly(id: string, readOnly: boolean): Promise<void>;
  /** The customer's overrides of a running instance become exactly `parameters`; answers those pending a restart. */
  applyParameters(id: string, parameters: Readonly<Record<string, string>>): Promise<string[]>;
  /** Fast shutdown; resolves when the postmaster is gone and the port refuses connections. */
  stop(id: string): Promise<void>;
  /** stop() then start(), in one turn. */
  restart(id: string, opts: InstanceSettings): Promise<void>;
  /** Resize: start() with the new tier, which restarts the instance only if settings change. */
  applyTier(id: string, opts: InstanceSettings): Promise<void>;
  /** Current state from the data directory, postmaster.pid, /proc and a socket query; `port` is the published one. */
  observe(id: string): Promise<RuntimeObservation>;
  /** Stops the instance and deletes its data directory and log. */
  purge(id: string): Promise<void>;
  /** Ids that have a complete data directory. */
  listInstances(): Promise<string[]>;
  /** Removes `.tmp-`/`.purging-` leftovers of crashed operations; returns removed names. */
  cleanupLeftovers(): Promise<string[]>;
  /** Stops every running instance (agent shutdown). */
  stopAll(): Promise<void>;
  /** Has the proxy serve the instances a crashed agent left running (agent start). */
  serveRunning(): Promise<void>;
  /**
   * Gives every stopped server from before per-server users (data directory owned by the run-as user) a uid of its
   * own, its files chowned (agent start); resolves with their ids. One still running keeps the shared user until
   * its next start, which does the same.
   */
  ownServerUsers(): Promise<string[]>;
  /** PEM of the agent CA, for clients that verify the server (sslmode=verify-full). */
  caCertificatePem(): Promise<string>;
  /** Memory of the instance's processes (for metrics). */
  resourceUsage(id: string): Promise<InstanceResourceUsage>;
  /** The agent's session on the running server, over its own socket (from its postmaster.pid); undefined when none runs. */
  agentConnection(id: string): Promise<AgentConnection | undefined>;
  /** `fn` in one of the agent's sessions kept open on the running server (admin-sessions.ts); ServerNotRunning when none runs. */
  adminSession<T>(id: string, fn: (c: pg.Client) => Promise<T>, opts?: AdminSessionOptions): Promise<T>;
  /** Files and programs as the instance's server. */
  serverFiles(id: string): Promise<ServerFiles>;
  /** CPU, memory and storage of the running server (the sampler's); undefined when none runs. */
  serverUsage(id: string): Promise<ServerUsage | undefined>;
  /** The server's log directory, its uid and its tier's quota; undefined when the instance is not here. */
  serverLog(id: string): Promise<ServerLog | undefined>;
  /** `<root>/wal-spool`: one spool per instance. */
  readonly walSpoolRoot: string;
  /** Each server its own user, or all of them the agent's (it cannot switch users). */
  readonly isolation: Isolation;
  /** Whether servers get kernel limits (a cgroup each) and, where not, why. */
  readonly resourceLimits: { mode: CgroupMode; reason?: string };
  /** The counters of an instance's cgroup (what its limits did), or undefined without one. */
  limitStats(id: string): Promise<CgroupStats | undefined>;
  /** Server log file of an instance. */
  logPath(id: string): string;
  /** Directory holding the instances' unix sockets. */
  readonly socketDir: string;
  /** The connection proxy serving the instances' published ports (its counters are the databases' transfer). */
  readonly proxy: ConnectionProxy;
  /** Major versions this host can run, oldest first: the one place the agent learns them. */
  readonly availableMajors: readonly string[];
}

/**
 * Creates an instance manager for the PostgreSQL instances under
 * `opts.dataDir`. Only one manager (one agent process) may own a data
 * directory at a time; within it, operations on one instance id are
 * serialized, different ids run concurrently.
 */
export function createInstanceManager(opts: InstanceManagerOptions): InstanceManager {
  const host = createHost(opts);
  const queue = createSerializer();
  const dirs = createDataDirs(host, queue.isQueued, opts.store);
  const poolerSupport = opts.pgbouncerPath
    ? createPoolerSupport(opts.pgbouncerPath)
    : { available: false, reason: "no PGBOUNCER_PATH given to the agent" };
  const poolers = createPoolers(host, opts.pgbouncerPath ?? "pgbouncer");

  async function stopAll(): Promise<void> {
    // The poolers stop with their servers (and come back with them at the next start).
    await poolers.stopAll().catch((e) => host.log(`poolers not all stopped: ${(e as Error).message}`));
    const ids = await dirs.list();
    const errors: unknown[] = [];
    const pending = [...ids];
    const workers = Array.from({ length: Math.min(8, pending.length) }, async () => {
      for (let id = pending.shift(); id !== undefined; id = pending.shift()) {
        await queue.run(id, () => stopInstance(host, id)).catch((e) => errors.push(e));
      }
    });
    await Promise.all(workers);
    if (errors.length) throw new AggregateError(errors, `stopAll: ${errors.length} instance(s) failed to stop`);
  }

  // Each call below joins its instance's queue synchronously, so operations
  // run in the order they were called.
  async function serveRunning(): Promise<void> {
    await host.init();
    for (const id of await dirs.list()) {
      await queue
        .run(id, () => resumeServing(host, id))
        .catch((e) => host.log(`instance ${id}: not served again: ${(e as Error).message}`));
    }
  }

  async function ownServerUsers(): Promise<string[]> {
    await host.init();
    const done: string[] = [];
    for (const id of await dirs.list()) {
      await queue
        .run(id, async () => {
          const state = (await observeInstance(host, id)).state;
          if (state === "stopped" && (await host.ownServerUser(id))) done.push(id);
        })
        .catch((e) => host.log(`instance ${id}: not given a user of its own: ${(e as Error).message}`));
    }
    return done;
  }

  return {
    poolerSupport,
    // Takes no turn: the pooler only reads the running server's pid file; its own work is serialized by its caller.
    syncPooler: async (id, settings) => {
      assertId(id);
      if (settings && !poolerSupport.available) return { running: false, message: poolerSupport.reason };
      await host.init();
      return poolers.sync(id, settings);
    },
    listPoolers: () => poolers.list(),
    removePooler: async (id) => {
      assertId(id);
      await poolers.remove(id);
    },
    socketDir: host.socketDir,
    proxy: host.proxy,
    resourceLimits: { mode: host.cgroups.mode, ...(host.cgroups.reason ? { reason: host.cgroups.reason } : {}) },
    limitStats: async (id) => {
      assertId(id);
      return host.cgroups.stats(id);
    },
    availableMajors: [...host.binaries.keys()].sort((a, b) => Number(a) - Number(b)),
    logPath: (id) => {
      assertId(id);
      return host.logPath(id);
    },
    ensureTemplate: async (major) => {
      host.binariesFor(major);
      return dirs.ensureTemplate(major);
    },
    provision: async (id, o) => {
      assertId(id);
      return queue.run(id, async () => {
        await host.init();
        await dirs.provision(id, o.major, { ...(o.restore ? { restore: o.restore } : {}), ...(o.seed ? { seed: o.seed } : {}) });
      });
    },
    start: async (id, o) => {
      assertId(id);
      return queue.run(id, async () => {
        await host.init();
        await startInstance(host, id, o);
      });
    },
    adopt: async (id, replicaId) => {
      assertId(id);
      assertId(replicaId);
      // In both turns: a start of the replica still under way (its spec was just retired) must not race the rename.
      return queue.run(id, () =>
        queue.run(replicaId, async () => {
          await host.init();
          await adoptReplica(host, id, replicaId);
        }),
      );
    },
    // Takes no turn: a quick statement on a running server, also made by a base backup that runs outside the turns.
    syncReplicationSlots: async (id, slots) => {
      assertId(id);
      const published = await publishedPortOf(configPath(host.instanceDir(id)), id);
      if (!published) throw new Error(`instance ${id} has never been started`);
      const { created, dropped } = await withAgentClient(host.socketDir, published, async (c) => {
        // The role too: a primary started by an agent from before replicas has none.
        await ensureReplicationRole(c, host.replicationSecret, id);
        return syncSlots(c, slots);
      });
      if (created.length) host.log(`instance ${id}: replication slots created: ${created.join(", ")}`);
      if (dropped.length) host.log(`instance ${id}: replication slots dropped: ${dropped.join(", ")}`);
    },
    holdStandbySlots: async (id, slots) => {
      assertId(id);
      const published = await publishedPortOf(configPath(host.instanceDir(id)), id);
      if (!published) throw new Error(`instance ${id} has never been started`);
      const { created, dropped } = await withAgentClient(host.socketDir, published, (c) => holdSlots(c, slots));
      if (created.length) host.log(`instance ${id}: slots held for the other members created: ${created.join(", ")}`);
      if (dropped.length) host.log(`instance ${id}: slots held for the other members dropped: ${dropped.join(", ")}`);
    },
    // Fencing takes no turn: it must not wait behind a slow start while a lease runs out (admission checks
    // host.fenced, and fences again when it changed during the start).
    fence: async (id) => {
      assertId(id);
      await fenceInstance(host, id);
    },
    unfence: async (id) => {
      assertId(id);
      await unfenceInstance(host, id);
    },
    isFenced: (id) => host.fenced.has(id),
    setSynchronousStandbys: async (id, names) => {
      assertId(id);
      assertSynchronousStandbyNames(names);
      await applySynchronousStandbys(host, id, names);
    },
    applyPassword: async (id, v) => {
      assertId(id);
      return queue.run(id, () => setPassword(host, id, v));
    },
    // Takes no turn, like the slots: a file and a reload on a running server.
    applyReadOnly: async (id, readOnly) => {
      assertId(id);
      const published = await publishedPortOf(configPath(host.instanceDir(id)), id);
      if (!published) throw new Error(`instance ${id} has never been started`);
      await writeOwned(await host.serverUser(id), path.join(host.instanceDir(id), READ_ONLY_CONF), renderReadOnlyConf(readOnly));
      await withAgentClient(host.socketDir, published, (c) => c.query("SELECT pg_reload_conf()"));
      host.log(`instance ${id}: ${readOnly ? "read-only (storage full)" : "writable"}`);
    },
    applyParameters: async (id, parameters) => {
      assertId(id);
      return queue.run(id, () => applyParameters(host, id, parameters));
    },
    stop: async (id) => {
      assertId(id);
      return queue.run(id, () => stopInstance(host, id));
    },
    restart: async (id, o) => {
      assertId(id);
      assertSettings(o);
      return queue.run(id, async () => {
        await stopInstance(host, id);
        await startInstance(host, id, o);
      });
    },
    applyTier: async (id, o) => {
      assertId(id);
      return queue.run(id, () => startInstance(host, id, o));
    },
    // Takes no turn: observing must stay cheap and answer even while a slow start is in flight.
    observe: async (id) => {
      assertId(id);
      const obs = await observeInstance(host, id);
      // The port clients use (the proxy's), not the server's private one.
      const published = obs.port && (await publishedPortOf(configPath(host.instanceDir(id)), id));
      // Replicas stream from the server itself (its private port), not through the proxy.
      return published ? { ...obs, port: published, replicationAddress: host.privateAddress, replicationPort: obs.port! } : obs;
    },
    purge: async (id) => {
      assertId(id);
      return queue.run(id, async () => {
        await host.init();
        await poolers.remove(id);
        await dirs.purge(id);
        await removeReplicaFiles(host, id);
        await host.proxy.forget(id);
      });
    },
    listInstances: () => dirs.list(),
    cleanupLeftovers: () => dirs.cleanupLeftovers(),
    stopAll,
    serveRunning,
    ownServerUsers,
    caCertificatePem: async () => (await host.ca()).certPem,
    resourceUsage: async (id) => {
      assertId(id);
      return resourceUsage(host, id);
    },
    walSpoolRoot: walSpoolRoot(host.root),
    isolation: host.isolation,
    agentConnection: async (id) => {
      assertId(id);
      return agentConnectionOf(host, id);
    },
    adminSession: (id, fn, o) => {
      assertId(id);
      return adminSession(host, id, fn, o);
    },
    serverFiles: async (id) => {
      assertId(id);
      return serverFilesOf(await host.serverUser(id));
    },
    serverUsage: async (id) => {
      assertId(id);
      return serverUsage(host, id);
    },
    serverLog: async (id) => {
      assertId(id);
      const user = await host.serverUser(id).catch(() => undefined);
      if (!user) return undefined;
      // The tier the server was last started with (dbaas.conf's header).
      const tier = /^# tier: (\S+)$/m.exec(await readOwned(undefined, configPath(host.instanceDir(id))).catch(() => ""))?.[1] ?? "";
      return { dir: host.serverLogDir(id), uid: user.uid, quotaBytes: logQuotaBytes(tier) };
    },
  };
}
