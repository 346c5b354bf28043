import type { InstanceAccess } from "./instance-access.ts";

/**
 * The boundary between the reconciler and wherever PostgreSQL instances
 * actually run. The reconciler (and the agent's status RPC) speak only this
 * interface; backups and samples speak it and its {@link InstanceAccess}
 * (instance-access.ts), never the runtime's own modules. Today's
 * implementation runs local processes (`instances/local-runtime.ts`). A
 * runtime that drives Kubernetes (CloudNativePG `Cluster` resources) for
 * hosts beyond one machine is meant to plug in here.
 */

/**
 * How a runtime's servers are kept apart: `per-tenant-uid`, each its own OS
 * user (or, for a runtime of pods, its own pod); `shared-uid`, every server
 * runs as the agent (it cannot switch users), isolated only by PostgreSQL.
 */
export type Isolation = "per-tenant-uid" | "shared-uid";

/** What an instance is started with. Every start and resize carries all of it. */
export interface InstanceSettings {
  /** TCP port clients connect to (>= 1024). */
  port: number;
  /** A catalogue tier name (micro … xlarge); decides memory, connections, parallelism. */
  tier: string;
  /** DNS name (or IP) clients use; the server certificate covers it. */
  hostname: string;
  /** `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>` for dbadmin; never a password. */
  scramVerifier: string;
  /**
   * Set for a read replica: the primary it streams from. The instance runs as
   * a hot standby (refuses writes), its password is never set (it arrives by
   * replication) and its start is done once its WAL receiver streams.
   */
  replica?: ReplicaConnection;
  /**
   * A standby of a highly available database: its port is never served to
   * clients (its start probes the server's private address instead).
   */
  unpublished?: boolean;
  /**
   * The customer's configuration overrides (PostgreSQL's notation, allowlisted by the databases
   * service): the server starts with them (they outrank the tier's settings).
   */
  parameters?: Readonly<Record<string, string>>;
}

/** Where a replica streams from (the spec's ReplicaSource, less the seed). */
export interface ReplicaConnection {
  primaryDatabaseId: string;
  /** The primary server's private address and port (as its agent observed them; not the proxy's). */
  primaryAddress: string;
  primaryPort: number;
  /** Name in the primary's certificate and the CA that issued it (sslmode=verify-full). */
  primaryHost: string;
  primaryCaPem: string;
  /** The physical slot on the primary this replica streams from. */
  slotName: string;
}

/** A replica's data: a completed base backup of its primary, taken after the replica's slot existed. */
/** A slot a standby keeps for another member of its primary, and where that member last reported its WAL (0n: not yet). */
export interface HeldSlotPosition {
  name: string;
  position: bigint;
}

export interface SeedRequest {
  primaryDatabaseId: string;
  backupId: string;
}

/**
 * Create the instance from another database's backups (point-in-time
 * restore) instead of an empty cluster. The databases service only asks for
 * a `restoreTime` inside the source's restore window, so every WAL file up
 * to that instant is in the blob store.
 */
export interface RestoreRequest {
  /** The database whose blob-store prefix holds the base backups and WAL (it may be deleted, or on another agent). */
  sourceDatabaseId: string;
  /** The instance holds exactly the transactions the source committed up to this instant. */
  restoreTime: Date;
}

/**
 * - `absent`: no data for this id (never created, destroyed, or lost).
 * - `stopped`: data kept, no server.
 * - `running`: a server runs (see `message` for one that does not accept connections yet).
 * - `crashed`: the server died without a stop; `start` recovers it with its data.
 */
/** A database's connection pooler (docs/product.md, Trusted sources and connection pooling). */
export interface PoolerSettings {
  mode: "transaction" | "session";
  poolSize: number;
  maxClientConnections: number;
  /** Its published port (the meter serves it, accounted to the database). */
  port: number;
  /** Its host name: its certificate's. */
  host: string;
  /** dbadmin's verifier: clients log in with the database's password (SCRAM), checked against it. */
  scramVerifier: string;
}

export interface PoolerStatus {
  running: boolean;
  pid?: number;
  /** Why it does not run although asked to. */
  message?: string;
}

export type InstanceState = "absent" | "stopped" | "running" | "crashed";

/** What `observe` saw. */
export interface RuntimeObservation {
  state: InstanceState;
  /** Port clients connect to (the published one), when running. */
  port?: number;
  /** Process id of the server where the runtime has one (running, or the dead one when crashed). */
  pid?: number;
  /** Why a running server is not healthy, or what a crash left behind; absent when all is well. */
  message?: string;
  /** Where the running server listens for replication (its private address and port), when running. */
  replicationAddress?: string;
  replicationPort?: number;
  /** How far its WAL goes, in bytes (a primary: written; a standby: received), when running. */
  walPosition?: bigint;
}

/** Whether a runtime holds each server to its tier's CPU, memory and pids, how, and why not. */
export interface ResourceLimits {
  enforced: boolean;
  /** "cgroup v1", "cgroup v2", or "none". */
  how: string;
  reason?: string;
}

/**
 * Where instances run. One runtime per agent; ids are database ids
 * (`[A-Za-z0-9][A-Za-z0-9_-]{0,62}`).
 *
 * Contract:
 * - **Idempotent, level-based.** Every method may be called again after a
 *   success, a failure or a crash of the agent half-way through, and converges
 *   to the same result: `create` of an existing instance (same version) and
 *   `stop` of a stopped one do nothing, `destroy` of an absent one does
 *   nothing, `start` of a running one with the same settings only re-applies
 *   the password and access rules. The caller keeps no record of what it did
 *   beyond the spec generation it last applied.
 * - **Restores** are a `create` with `restore` followed by the ordinary
 *   `start`. `create` fetches the newest completed base backup of the source
 *   taken before the target and the WAL after it (an interrupted fetch is
 *   redone from scratch; the instance is not listed until its data is
 *   complete); `start` replays that WAL up to the target, promotes, and only
 *   then applies the verifier and lets clients in, so "done means done"
 *   holds: once `start` resolves the restore is finished and the instance is
 *   an ordinary one. A `start` or `restart` interrupted during the replay
 *   resumes it (PostgreSQL carries on from its last restartpoint).
 * - **One operation per instance at a time.** Calls for the same id run in the
 *   order they were made, one after another; different ids run concurrently.
 *   `observe` is the exception: it answers at once, even while a slow start
 *   of the same id is under way.
 * - **Done means done.** A method resolves only when its effect holds:
 *   `start`/`restart`/`resize` once a TLS login over TCP reaches password
 *   authentication with the settings given (and only that verifier works);
 *   `stop` once no server process is left and the port refuses connections
 *   (and every commit before a clean stop has been archived);
 *   `destroy` once the data is gone; `setPassword` once new logins need the
 *   new password.
 * - **Errors** are thrown as `Error` with a message fit for an operator (and
 *   for the database's `failed` message): an invalid id or settings, an
 *   unknown version, a start that did not come up (with the server log's
 *   tail), a stop that left a process behind. Nothing is retried inside; the
 *   reconciler retries on its next pass. An instance that is not there is
 *   not an error for `observe` (`absent`), but is for `start` and `setPassword`.
 * - **`observe` never throws for a known state** and is cheap enough to call
 *   for every instance on every heartbeat.
 */
export interface InstanceRuntime extends InstanceAccess {
  /** PostgreSQL major versions this runtime can create, newest first (what the agent registers). */
  readonly versions: readonly string[];
  /** How its servers are isolated from each other (start-up line, agent status, /healthz). */
  readonly isolation: Isolation;
  /** The kernel limits its servers run under (the agent's start-up line, status and /healthz say so). */
  readonly resourceLimits: ResourceLimits;
  /**
   * Makes the runtime ready before any other call: clears what an agent
   * crash left half-done, builds what creates copy from. Idempotent.
   */
  prepare(): Promise<void>;
  /**
   * Creates the instance's data, not started. Fails if it exists with another
   * version. With `restore`: from the source's newest base backup completed
   * at or before `restoreTime` (which must be of `version`), or fails naming
   * why ("no base backup of … before …", "version mismatch"). With `seed`:
   * a replica's data from that backup of its primary (its start streams the rest).
   */
  create(id: string, opts: { version: string; restore?: RestoreRequest; seed?: SeedRequest }): Promise<void>;
  /**
   * A replica's data becomes instance `id`'s (a promoted replica): promotes
   * `replicaId` if it is still a standby, stops it and moves its data
   * directory to `id`; the ordinary `start` follows. Each step is idempotent:
   * done already (`id` exists, `replicaId` gone) is a no-op.
   */
  adopt(id: string, replicaId: string): Promise<void>;
  /**
   * On a running primary: creates the listed `dbaas_` replication slots that
   * are missing and drops (ending their walsenders) every other `dbaas_` slot.
   */
  syncReplicationSlots(id: string, slots: readonly string[]): Promise<void>;
  /**
   * On a running standby of a highly available database: the slots it keeps
   * for the other members of its primary, each held at the position given
   * (replication.ts, holdSlots); every other `dbaas_` slot dropped.
   */
  holdStandbySlots(id: string, slots: readonly HeldSlotPosition[]): Promise<void>;
  /**
   * Fences the instance: no client session (the agent's and replication
   * connections only) until `unfence`, whatever starts it meanwhile — a start
   * of a fenced instance ends without admitting clients. Resolves once
   * running client sessions are gone and new ones are refused; idempotent,
   * answers at once for an instance that does not run (it comes up fenced).
   * Takes no turn: it must not wait behind a slow start (a lease is ending).
   */
  fence(id: string): Promise<void>;
  /** Lets clients in again (a running instance's access rules reopened); idempotent. */
  unfence(id: string): Promise<void>;
  /** Whether the instance is fenced now (as `fence` left it). */
  isFenced(id: string): boolean;
  /**
   * Fencing that does not need the agent (optional; the local runtime's watchdog process, instances/watchdog.ts):
   * `remaining` holds every highly available primary that may take writes now (not fenced, or its fence not yet
   * done) with the ms left until its lease ends as the agent counts it (≤ 0: ended). Resolves once that is durable;
   * from then on, should the agent publish nothing newer, each is stopped before its lease ends even if the agent
   * is dead. A primary left out is never stopped by it.
   */
  armFencing?(remaining: ReadonlyMap<string, number>): Promise<void>;
  /** On a running primary: its synchronous_standby_names, applied by a reload (never a restart). */
  setSynchronousStandbys(id: string, names: string): Promise<void>;
  /** Starts a created, stopped or crashed instance; on a running one see the contract above. */
  start(id: string, settings: InstanceSettings): Promise<void>;
  /** Stops the server, keeping the data. A crashed instance is cleaned up to `stopped`. */
  stop(id: string): Promise<void>;
  /** A fresh server process with these settings (the same tier), whatever runs now. */
  restart(id: string, settings: InstanceSettings): Promise<void>;
  /** Applies a new tier; restarts the server only if the settings it runs with change. */
  resize(id: string, settings: InstanceSettings): Promise<void>;
  /**
   * Replaces dbadmin's verifier on a running instance and ends dbadmin's open
   * sessions; fails if it is not running. A replica takes it by replication:
   * the call waits until it has, then ends the sessions there.
   */
  setPassword(id: string, scramVerifier: string): Promise<void>;
  /**
   * Makes a running primary read-only (`default_transaction_read_only` for
   * every session, kept across restarts) or writable again: its tier's
   * storage is full, or no longer. A session may still opt back into writes.
   */
  setReadOnly(id: string, readOnly: boolean): Promise<void>;
  /**
   * Makes the customer's overrides of a running server exactly `parameters` (ALTER SYSTEM, then a
   * reload: done once the server has reloaded) and answers the names of the parameters waiting for a
   * restart (pg_settings.pending_restart). Fails if it is not running.
   */
  setParameters(id: string, parameters: Readonly<Record<string, string>>): Promise<string[]>;
  /** What a server of `tier` runs with before any override: the tier's settings and those set whatever the tier. */
  serverDefaults(tier: string): Record<string, string>;
  /** The instance's current state, read from the real system, never from a cache. */
  observe(id: string): Promise<RuntimeObservation>;
  /**
   * Whether the server a `running` observation described has exited since, checked without touching its data
   * (the local runtime: its postmaster's pid, signal 0 and its procfs state), so that the agent notices a crash between two heartbeats and
   * starts the server again at once. A runtime that cannot tell that cheaply answers false: the next
   * heartbeat's `observe` notices.
   */
  exited(seen: RuntimeObservation): boolean;
  /** Stops the instance if needed and removes its data for good. */
  destroy(id: string): Promise<void>;
  /** Ids of every instance that exists (complete data), sorted. */
  list(): Promise<string[]>;
  /**
   * Connection poolers, where the runtime has them: whether it can run one (and why not), and the
   * pooler of instance `id` made to run with `settings` while its server runs (undefined: stopped
   * and unpublished). Idempotent; a pooler found running (started before an agent restart) is kept.
   */
  readonly poolerSupport?: { available: boolean; reason: string };
  syncPooler?(id: string, settings: PoolerSettings | undefined): Promise<PoolerStatus>;
  /** Instances with pooler state (running or not), and the removal of one's (its database purged). */
  listPoolers?(): Promise<string[]>;
  removePooler?(id: string): Promise<void>;
  /** PEM of the CA that signs every instance's server certificate (clients pin it for verify-full). */
  caCertificatePem(): Promise<string>;
  /**
   * The agent is stopping. A runtime whose instances live in the agent's
   * processes stops them (desired state is unchanged, so the next start brings
   * them back); one whose instances outlive the agent leaves them running.
   */
  shutdown(): Promise<void>;
}
