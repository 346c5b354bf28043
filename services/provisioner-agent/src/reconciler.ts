import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Logger, tracedWork, type TracedWork } from "@dbaas/kit";
import { DesiredState, InstanceObservationSchema, ObservedState, type InstanceObservation, type InstanceSpec } from "@dbaas/proto/agent";
import type { AppliedState, AppliedStore } from "./applied-state.ts";
import type { InstanceRuntime, InstanceSettings, ReplicaConnection, RestoreRequest, RuntimeObservation } from "./runtime.ts";

/** After this many failed attempts at one spec generation the database is reported failed (and retried on). */
const ATTEMPTS_BEFORE_FAILED = 3;

export interface ReconcilerOptions {
  /** Where instances run; the reconciler knows them only through this interface. */
  runtime: InstanceRuntime;
  applied: AppliedStore;
  log: Logger;
  concurrency: number;
  /** Called with each new observation, as soon as it is made. */
  report: (obs: InstanceObservation) => void;
  /** Removes a purged database's backups from the blob store; runs before its data goes, so a crash retries it. */
  purgeBackups?: (databaseId: string) => Promise<void>;
}

/** A restored database's source and target, as the runtime takes them. */
function restoreRequest(spec: InstanceSpec): RestoreRequest | undefined {
  const src = spec.restoreSource;
  if (!src) return undefined;
  if (!src.restoreTime) throw new Error(`restore from ${src.databaseId} has no restore time`);
  return { sourceDatabaseId: src.databaseId, restoreTime: timestampDate(src.restoreTime) };
}

/** A replica's primary as the runtime takes it, or why the replica cannot start yet. */
function replicaConnection(spec: InstanceSpec): ReplicaConnection | string | undefined {
  const r = spec.replicaOf;
  if (!r) return undefined;
  if (!r.primaryAddress || !r.primaryPort) return `waiting for the address of its primary ${r.primaryDatabaseId}`;
  return {
    primaryDatabaseId: r.primaryDatabaseId,
    primaryAddress: r.primaryAddress,
    primaryPort: r.primaryPort,
    primaryHost: r.primaryHost,
    primaryCaPem: r.primaryCaPem,
    slotName: r.slotName,
  };
}

/**
 * Level-based reconciliation: desired state (the latest snapshot from the
 * databases service) against observed state (data dir, postmaster, readiness),
 * one idempotent step sequence per instance, never two at once for the same
 * instance. Safe to kill at any point: the next run observes and carries on.
 */
export function createReconciler(opts: ReconcilerOptions) {
  const { runtime, applied, log } = opts;
  let specs = new Map<string, InstanceSpec>();
  let received = false;
  const observations = new Map<string, InstanceObservation>();
  const busy = new Set<string>();
  const dirty = new Set<string>();
  const failures = new Map<string, { generation: bigint; attempts: number }>();
  /** The replication slots each running primary was last made to hold (forgotten when its server restarts). */
  const slotsSynced = new Map<string, string>();
  let failedSteps = 0;
  const waiting: Array<() => void> = [];
  let active = 0;
  let stopped = false;
  const idle = new Set<() => void>();

  const acquire = async () => {
    while (active >= opts.concurrency) await new Promise<void>((r) => waiting.push(r));
    active++;
  };
  const release = () => {
    active--;
    waiting.shift()?.();
  };

  const observe = (spec: InstanceSpec, state: ObservedState, appliedCredentials: bigint, message = "", seen?: RuntimeObservation) => {
    const obs = create(InstanceObservationSchema, {
      databaseId: spec.databaseId,
      state,
      observedGeneration: spec.generation,
      appliedCredentialsGeneration: appliedCredentials,
      message,
      ...(state === ObservedState.RUNNING && seen?.replicationPort
        ? { replicationAddress: seen.replicationAddress ?? "", replicationPort: seen.replicationPort }
        : {}),
    });
    const prev = observations.get(spec.databaseId);
    observations.set(spec.databaseId, obs);
    // Only news is sent at once; the periodic heartbeat repeats the rest.
    if (
      !prev ||
      prev.state !== obs.state ||
      prev.observedGeneration !== obs.observedGeneration ||
      prev.appliedCredentialsGeneration !== obs.appliedCredentialsGeneration ||
      prev.message !== obs.message ||
      prev.replicationAddress !== obs.replicationAddress ||
      prev.replicationPort !== obs.replicationPort
    ) {
      opts.report(obs);
    }
  };

  async function converge(spec: InstanceSpec): Promise<void> {
    const prior = await applied.read(spec.databaseId);
    const upToDate = prior !== undefined && BigInt(prior.generation) >= spec.generation;
    // A replica's password arrives by replication: there is never one to set.
    const credentialsCurrent =
      prior !== undefined && (spec.replicaOf !== undefined || BigInt(prior.credentialsGeneration) >= spec.credentialsGeneration);
    // Work on a change joins the trace of the request that made it; work on an applied spec (a crashed
    // instance started again) is a trace of its own. A converge with nothing to do makes no span.
    const work = tracedWork("reconcile", upToDate && credentialsCurrent ? {} : spec.traceContext, {
      "dbaas.database_id": spec.databaseId,
      "dbaas.generation": String(spec.generation),
    });
    try {
      await convergeTraced(spec, prior, upToDate, credentialsCurrent, work);
      work.end();
    } catch (err) {
      work.end(err);
      throw err;
    }
  }

  /** The steps toward `spec`, each a span of `work`. */
  async function convergeTraced(
    spec: InstanceSpec,
    prior: AppliedState | undefined,
    upToDate: boolean,
    credentialsCurrent: boolean,
    work: TracedWork,
  ): Promise<void> {
    const id = spec.databaseId;
    const replica = replicaConnection(spec);
    const settings: InstanceSettings = {
      port: spec.port,
      tier: spec.tier,
      hostname: spec.host,
      scramVerifier: spec.scramVerifier,
      ...(typeof replica === "object" ? { replica } : {}),
    };
    const record = async () => {
      if (upToDate && credentialsCurrent) return;
      await applied.write(id, {
        generation: String(spec.generation),
        credentialsGeneration: String(spec.credentialsGeneration),
        tier: spec.tier,
      });
    };

    switch (spec.desiredState) {
      case DesiredState.RUNNING: {
        let state = await runtime.observe(id);
        // Not failures: the databases service fills these in once the primary is observed and the seed backup
        // completed. A replica already running as wanted keeps running meanwhile (its primary is restarting).
        if (typeof replica === "string" && !(state.state === "running" && upToDate)) {
          observe(spec, ObservedState.PROGRESSING, 0n, replica);
          return;
        }
        // Until its first start is recorded, an adopting database finishes the adoption again (an agent killed
        // after the rename, before the replica's archive and applied record were removed); adopt is idempotent.
        if (spec.adoptInstanceId && (state.state === "absent" || prior === undefined)) {
          const from = spec.adoptInstanceId;
          await work.step("adopt", async () => {
            await runtime.adopt(id, from);
            // What the promoted standby archived under the replica's id is of no use to anyone.
            await opts.purgeBackups?.(from);
            await applied.remove(from);
          });
          state = await runtime.observe(id);
        } else if (state.state === "absent") {
          if (prior) throw new Error("the data directory of this database is missing on its host");
          if (spec.replicaOf && !spec.replicaOf.seedBackupId) {
            observe(spec, ObservedState.PROGRESSING, 0n, "waiting for the seed backup of its primary");
            return;
          }
          // A restored database is created from its source's backups; its first start replays them. A replica, from its seed.
          const restore = restoreRequest(spec);
          const r = spec.replicaOf;
          const seed = r ? { primaryDatabaseId: r.primaryDatabaseId, backupId: r.seedBackupId } : undefined;
          await work.step("provision", () =>
            runtime.create(id, { version: spec.version, ...(restore ? { restore } : {}), ...(seed ? { seed } : {}) }),
          );
          state = await runtime.observe(id);
        }
        if (state.state !== "running" || !upToDate) slotsSynced.delete(id);
        if (state.state === "running" && !upToDate) {
          // A new generation of a running instance is a resize (its tier changed) or a restart.
          if (prior !== undefined && prior.tier !== spec.tier) await work.step("resize", () => runtime.resize(id, settings));
          else await work.step("restart", () => runtime.restart(id, settings));
        } else if (state.state !== "running") {
          if (state.state === "crashed") log.warn("instance found dead; starting it again", { database_id: id });
          await work.step("start", () => runtime.start(id, settings));
        } else if (!credentialsCurrent) {
          await work.step("set password", () => runtime.setPassword(id, spec.scramVerifier));
        }
        // A primary holds exactly its replicas' slots: a slot of a replica that is gone would keep WAL forever.
        const slots = spec.replicationSlots.join(",");
        if (!spec.replicaOf && slotsSynced.get(id) !== slots) {
          await work.step("replication slots", () => runtime.syncReplicationSlots(id, spec.replicationSlots));
          slotsSynced.set(id, slots);
        }
        await record();
        observe(spec, ObservedState.RUNNING, spec.credentialsGeneration, "", await runtime.observe(id));
        work.mark("instance ready");
        return;
      }
      case DesiredState.STOPPED:
      case DesiredState.DELETED: {
        const state = await runtime.observe(id);
        if (state.state === "absent" && spec.replicaOf && !prior) {
          // A replica stopped (or deleted) before it was ever seeded: nothing runs, nothing to keep.
          observe(spec, ObservedState.STOPPED, spec.credentialsGeneration);
          return;
        }
        if (state.state === "absent") {
          throw new Error("the data directory of this database is missing on its host");
        }
        if (state.state === "running") await work.step("stop", () => runtime.stop(id));
        // A stopped instance takes the current verifier (and tier) when it next starts.
        await record();
        observe(spec, ObservedState.STOPPED, spec.credentialsGeneration);
        return;
      }
      case DesiredState.PURGED: {
        slotsSynced.delete(id);
        await work.step("purge", async () => {
          await opts.purgeBackups?.(id);
          await runtime.destroy(id);
          await applied.remove(id);
        });
        observe(spec, ObservedState.PURGED, spec.credentialsGeneration);
        return;
      }
      default:
        return;
    }
  }

  async function run(id: string): Promise<void> {
    if (busy.has(id)) {
      dirty.add(id);
      return;
    }
    busy.add(id);
    try {
      do {
        dirty.delete(id);
        const spec = specs.get(id);
        if (!spec || stopped) break;
        await acquire();
        try {
          await converge(spec);
          failures.delete(id);
        } catch (err) {
          const f = failures.get(id);
          const attempts = f && f.generation === spec.generation ? f.attempts + 1 : 1;
          failures.set(id, { generation: spec.generation, attempts });
          const message = (err as Error).message;
          failedSteps++;
          log.warn("reconcile step failed", { database_id: id, attempts, error: message });
          if (attempts >= ATTEMPTS_BEFORE_FAILED) {
            const prior = await applied.read(id);
            observe(spec, ObservedState.FAILED, BigInt(prior?.credentialsGeneration ?? 0), message);
          }
        } finally {
          release();
        }
      } while (dirty.has(id));
    } finally {
      busy.delete(id);
      if (busy.size === 0) for (const fn of idle) fn();
    }
  }

  return {
    /** Replaces the desired state with a new snapshot and converges every instance in it. */
    setDesired(next: InstanceSpec[]): void {
      specs = new Map(next.map((s) => [s.databaseId, s]));
      received = true;
      for (const id of specs.keys()) void run(id);
    },
    /** Re-observes everything (a crashed postmaster is noticed and restarted here). */
    resync(): void {
      if (!received) return;
      for (const id of specs.keys()) void run(id);
    },
    /** Failed convergence attempts since the process started (reconcile_errors_total). */
    failedSteps(): number {
      return failedSteps;
    },
    /** The latest observation of every instance in the desired state, for the heartbeat report. */
    observations(): InstanceObservation[] {
      return [...specs.keys()].map((id) => observations.get(id)).filter((o): o is InstanceObservation => !!o);
    },
    /** Stops taking new work and resolves when what is under way has finished. */
    async drain(): Promise<void> {
      stopped = true;
      if (busy.size === 0) return;
      await new Promise<void>((r) => idle.add(r));
    },
  };
}

export type Reconciler = ReturnType<typeof createReconciler>;
