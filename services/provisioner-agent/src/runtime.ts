/**
 * The boundary between the reconciler and wherever PostgreSQL instances
 * actually run. The reconciler (and the agent's status RPC) speak only this
 * interface; today's implementation runs local processes
 * (`instances/local-runtime.ts`). A runtime that drives Kubernetes
 * (CloudNativePG `Cluster` resources) for hosts beyond one machine is meant to
 * plug in here, and backups, the connection proxy and replicas beside it.
 */

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
export interface InstanceRuntime {
  /** PostgreSQL major versions this runtime can create, newest first (what the agent registers). */
  readonly versions: readonly string[];
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
  /** Starts a created, stopped or crashed instance; on a running one see the contract above. */
  start(id: string, settings: InstanceSettings): Promise<void>;
  /** Stops the server, keeping the data. A crashed instance is cleaned up to `stopped`. */
  stop(id: string): Promise<void>;
  /** A fresh server process with these settings (the same tier), whatever runs now. */
  restart(id: string, settings: InstanceSettings): Promise<void>;
  /** Applies a new tier; restarts the server only if the settings it runs with change. */
  resize(id: string, settings: InstanceSettings): Promise<void>;
  /** Replaces dbadmin's verifier on a running instance; fails if it is not running. */
  setPassword(id: string, scramVerifier: string): Promise<void>;
  /** The instance's current state, read from the real system, never from a cache. */
  observe(id: string): Promise<RuntimeObservation>;
  /** Stops the instance if needed and removes its data for good. */
  destroy(id: string): Promise<void>;
  /** Ids of every instance that exists (complete data), sorted. */
  list(): Promise<string[]>;
  /** PEM of the CA that signs every instance's server certificate (clients pin it for verify-full). */
  caCertificatePem(): Promise<string>;
  /**
   * The agent is stopping. A runtime whose instances live in the agent's
   * processes stops them (desired state is unchanged, so the next start brings
   * them back); one whose instances outlive the agent leaves them running.
   */
  shutdown(): Promise<void>;
}
