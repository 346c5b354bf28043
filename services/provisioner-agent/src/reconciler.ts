import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Logger, tracedWork, type TracedWork } from "@dbaas/kit";
import { DesiredState, InstanceObservationSchema, ObservedState, type InstanceObservation, type InstanceSpec } from "@dbaas/proto/agent";
import type { AppliedState, AppliedStore } from "./applied-state.ts";
import type { InstanceRuntime, InstanceSettings, ReplicaConnection, RestoreRequest, RuntimeObservation } from "./runtime.ts";
import { timelineDivergence } from "./timeline-divergence.ts";

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
  /** Removes what an old primary left on this host (its WAL spool) but not its backups: the database lives on elsewhere. */
  discardBackups?: (databaseId: string) => Promise<void>;
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

/** One pass of the steps toward a running instance (see `runningSteps`). */
interface RunningPass {
  spec: InstanceSpec;
  id: string;
  /** The spec generation last carried out, if any. */
  prior: AppliedState | undefined;
  upToDate: boolean;
  credentialsCurrent: boolean;
  /** A replica's primary, or why it cannot start yet. */
  replica: ReplicaConnection | string | undefined;
  settings: InstanceSettings;
  work: TracedWork;
  /** The latest observation of the instance. */
  state: RuntimeObservation;
  /** This pass moved a promoted replica's data in: nothing to provision. */
  adopted?: boolean;
  /** This pass started, restarted or resized the server: its configuration is read again. */
  broughtUp?: boolean;
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
  /** The read-only state each running primary was last given (ALTER SYSTEM keeps it across restarts; a new agent applies it once). */
  const readOnlyApplied = new Map<string, boolean>();
  /** The synchronous_standby_names each running primary was last given (forgotten when its server restarts). */
  const standbysSynced = new Map<string, string>();
  /** Old primaries' instances to remove (after a failover), from the latest snapshot. */
  let discards = new Set<string>();
  /**
   * The config generation each instance's server has, and what waits there for a restart. Kept in
   * memory: after an agent restart the first pass applies the configuration again (idempotent).
   */
  const configApplied = new Map<string, bigint>();
  const pendingRestart = new Map<string, string[]>();
  /** What the last `running` report of each instance saw (its server's pid): `checkServers` asks whether it exited. */
  const lastRunning = new Map<string, RuntimeObservation>();
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

  const observe = (
    spec: InstanceSpec,
    state: ObservedState,
    appliedCredentials: bigint,
    message = "",
    seen?: RuntimeObservation,
    reseed = false,
  ) => {
    const running = state === ObservedState.RUNNING;
    if (running && seen?.state === "running") lastRunning.set(spec.databaseId, seen);
    else lastRunning.delete(spec.databaseId);
    const obs = create(InstanceObservationSchema, {
      databaseId: spec.databaseId,
      state,
      observedGeneration: spec.generation,
      appliedCredentialsGeneration: appliedCredentials,
      message,
      ...(running && seen?.replicationPort
        ? { replicationAddress: seen.replicationAddress ?? "", replicationPort: seen.replicationPort }
        : {}),
      // High availability: how far its WAL goes (failover picks the standby with the most), whether it is fenced.
      ...(running && seen?.walPosition !== undefined ? { walPosition: seen.walPosition } : {}),
      fenced: running && runtime.isFenced(spec.databaseId),
      appliedConfigGeneration: configApplied.get(spec.databaseId) ?? 0n,
      pendingRestart: pendingRestart.get(spec.databaseId) ?? [],
      reseed,
    });
    const prev = observations.get(spec.databaseId);
    observations.set(spec.databaseId, obs);
    // Only news is sent at once (the WAL position is not news); the periodic heartbeat repeats the rest.
    if (
      !prev ||
      prev.state !== obs.state ||
      prev.observedGeneration !== obs.observedGeneration ||
      prev.appliedCredentialsGeneration !== obs.appliedCredentialsGeneration ||
      prev.message !== obs.message ||
      prev.replicationAddress !== obs.replicationAddress ||
      prev.replicationPort !== obs.replicationPort ||
      prev.fenced !== obs.fenced ||
      prev.reseed !== obs.reseed ||
      prev.appliedConfigGeneration !== obs.appliedConfigGeneration ||
      prev.pendingRestart.join() !== obs.pendingRestart.join()
    ) {
      opts.report(obs);
    }
  };

  /**
   * What brings a database desired running there, in order. Each step looks at
   * the pass (`state` is the latest observation; a step that changes the
   * instance observes it again) and either does its one thing or nothing;
   * "wait" ends the pass without the instance running yet (not a failure).
   */
  const runningSteps: ReadonlyArray<(c: RunningPass) => Promise<"next" | "wait">> = [
    awaitPrimary,
    finishAdoption,
    reseed,
    provision,
    bringUp,
    applyConfig,
    syncSlots,
    syncReadOnly,
    syncStandbys,
  ];

  /**
   * A replica whose primary's address is not known yet waits: the databases service fills it in once the primary
   * is observed and the seed backup completed. A replica already running as wanted keeps running meanwhile (its
   * primary is restarting).
   */
  async function awaitPrimary(c: RunningPass): Promise<"next" | "wait"> {
    if (typeof c.replica !== "string" || (c.state.state === "running" && c.upToDate)) return "next";
    observe(c.spec, ObservedState.PROGRESSING, 0n, c.replica);
    return "wait";
  }

  /**
   * Until its first start is recorded, an adopting database finishes the adoption again (an agent killed after the
   * rename, before the replica's archive and applied record were removed); adopt is idempotent.
   */
  async function finishAdoption(c: RunningPass): Promise<"next" | "wait"> {
    const from = c.spec.adoptInstanceId;
    if (!from || (c.state.state !== "absent" && c.prior !== undefined)) return "next";
    await c.work.step("adopt", async () => {
      await runtime.adopt(c.id, from);
      // What the promoted standby archived under the replica's id is of no use to anyone.
      await opts.purgeBackups?.(from);
      await applied.remove(from);
    });
    c.adopted = true;
    c.state = await runtime.observe(c.id);
    return "next";
  }

  /**
   * A replica (or standby) that can never follow its primary (timeline-divergence.ts: it replayed WAL the old primary
   * wrote after the promoted standby's last position, or the new primary removed WAL it needs) is stopped and reported so (`reseed`), not
   * running, until the databases service takes its seed away; a replica whose data exists while its spec has no seed
   * is one the databases service asked to re-seed: its data goes, and `provision` waits for the new seed. Nothing
   * else takes a replica's seed away (it is kept once it completed).
   */
  async function reseed(c: RunningPass): Promise<"next" | "wait"> {
    const r = c.spec.replicaOf;
    if (!r || c.adopted || c.state.state === "absent") return "next";
    if (!r.seedBackupId) {
      await c.work.step("discard diverged data", async () => {
        await runtime.destroy(c.id);
        await applied.remove(c.id);
      });
      log.warn("replica's data discarded to be seeded again from its primary", { database_id: c.id });
      c.prior = undefined;
      c.state = await runtime.observe(c.id);
      return "next";
    }
    const why = await timelineDivergence(runtime, c.id);
    if (!why) return "next";
    if (c.state.state === "running") {
      log.warn("replica cannot follow its primary; stopped until it is seeded again", { database_id: c.id, why });
      await c.work.step("stop diverged replica", () => runtime.stop(c.id));
    }
    observe(c.spec, ObservedState.PROGRESSING, 0n, `cannot follow its primary: ${why}`, undefined, true);
    return "wait";
  }

  /** An absent instance is created: empty, from a restore's source backups, or a replica from its seed. */
  async function provision(c: RunningPass): Promise<"next" | "wait"> {
    if (c.adopted || c.state.state !== "absent") return "next";
    const { spec } = c;
    if (c.prior) throw new Error("the data directory of this database is missing on its host");
    if (spec.replicaOf && !spec.replicaOf.seedBackupId) {
      observe(spec, ObservedState.PROGRESSING, 0n, "waiting for the seed backup of its primary");
      return "wait";
    }
    // A restored database is created from its source's backups; its first start replays them. A replica, from its seed.
    const restore = restoreRequest(spec);
    const r = spec.replicaOf;
    const seed = r ? { primaryDatabaseId: r.primaryDatabaseId, backupId: r.seedBackupId } : undefined;
    await c.work.step("provision", () =>
      runtime.create(c.id, { version: spec.version, ...(restore ? { restore } : {}), ...(seed ? { seed } : {}) }),
    );
    c.state = await runtime.observe(c.id);
    return "next";
  }

  /**
   * The server runs with the spec's settings and verifier: started when it is not running (a crash included); a new
   * generation of a running one is a resize (its tier changed) or a restart; only a new verifier, a password change.
   */
  async function bringUp(c: RunningPass): Promise<"next" | "wait"> {
    const { id, settings, work } = c;
    if (c.state.state !== "running" || !c.upToDate) {
      slotsSynced.delete(id);
      // A start writes the spec's synchronous standbys itself.
      standbysSynced.delete(id);
    }
    if (c.state.state === "running" && !c.upToDate) {
      if (c.prior !== undefined && c.prior.tier !== c.spec.tier) await work.step("resize", () => runtime.resize(id, settings));
      else await work.step("restart", () => runtime.restart(id, settings));
      c.broughtUp = true;
    } else if (c.state.state !== "running") {
      if (c.state.state === "crashed") log.warn("instance found dead; starting it again", { database_id: id });
      await work.step("start", () => runtime.start(id, settings));
      c.broughtUp = true;
    } else if (!c.credentialsCurrent) {
      await work.step("set password", () => runtime.setPassword(id, c.spec.scramVerifier));
    }
    return "next";
  }

  /**
   * The server has the spec's configuration overrides (docs/product.md, Inside the database): a new
   * config generation is applied with ALTER SYSTEM and a reload; after a start, restart or resize (which
   * wrote them before the server started) only what waits for a restart is read again.
   */
  async function applyConfig(c: RunningPass): Promise<"next" | "wait"> {
    if (!c.broughtUp && configApplied.get(c.id) === c.spec.configGeneration) return "next";
    const pending = await c.work.step("configuration", () => runtime.setParameters(c.id, c.spec.parameters));
    configApplied.set(c.id, c.spec.configGeneration);
    pendingRestart.set(c.id, pending);
    return "next";
  }

  /**
   * A primary holds exactly its replicas' slots: a slot of a replica that is gone would keep WAL forever. A
   * standby of a highly available database holds one for each other member of its primary, advanced as they
   * report (each spec the control plane sends carries their positions), so a promotion keeps the WAL they need.
   */
  async function syncSlots(c: RunningPass): Promise<"next" | "wait"> {
    if (c.spec.replicaOf && !c.spec.standby) return "next";
    const held = c.spec.replicaOf ? c.spec.standbySlots.map((s) => ({ name: s.name, position: s.position })) : undefined;
    const slots = held ? held.map((s) => `${s.name}@${s.position}`).join(",") : c.spec.replicationSlots.join(",");
    if (slotsSynced.get(c.id) === slots) return "next";
    await c.work.step("replication slots", () =>
      held ? runtime.holdStandbySlots(c.id, held) : runtime.syncReplicationSlots(c.id, c.spec.replicationSlots),
    );
    slotsSynced.set(c.id, slots);
    return "next";
  }

  /** Storage full (the databases service decides from the samples): a primary is read-only until it is not. */
  async function syncReadOnly(c: RunningPass): Promise<"next" | "wait"> {
    if (c.spec.replicaOf || readOnlyApplied.get(c.id) === c.spec.readOnly) return "next";
    await c.work.step("read only", () => runtime.setReadOnly(c.id, c.spec.readOnly));
    readOnlyApplied.set(c.id, c.spec.readOnly);
    return "next";
  }

  /**
   * A highly available primary commits only once one of its streaming standbys has the WAL (in synchronous
   * mode): its synchronous_standby_names are the spec's standbys that stream from it now, by a reload, looked at
   * again every pass (each heartbeat) while the spec names any — a standby joins once it streams here.
   */
  async function syncStandbys(c: RunningPass): Promise<"next" | "wait"> {
    const names = c.spec.synchronousStandbyNames;
    if (c.spec.replicaOf || (names === "" && standbysSynced.get(c.id) === names)) return "next";
    await c.work.step("synchronous standbys", () => runtime.setSynchronousStandbys(c.id, names));
    standbysSynced.set(c.id, names);
    return "next";
  }

  /**
   * An old primary left here by a failover (its database runs on another agent now): fenced, its data and WAL
   * spool removed — never its backups, which the database keeps — and PURGED reported under its id.
   */
  async function discard(id: string): Promise<void> {
    const work = tracedWork("discard", {}, { "dbaas.database_id": id });
    try {
      await work.step("discard", async () => {
        await runtime.fence(id);
        await opts.discardBackups?.(id);
        await runtime.destroy(id);
        await applied.remove(id);
      });
      work.end();
    } catch (err) {
      work.end(err);
      throw err;
    }
    slotsSynced.delete(id);
    standbysSynced.delete(id);
    log.warn("old primary discarded after a failover: its data (with anything it wrote that its standby had not received) is gone", {
      database_id: id,
    });
    opts.report(
      create(InstanceObservationSchema, {
        databaseId: id,
        state: ObservedState.PURGED,
        observedGeneration: 0n,
        appliedCredentialsGeneration: 0n,
      }),
    );
  }

  async function converge(spec: InstanceSpec): Promise<void> {
    const prior = await applied.read(spec.databaseId);
    const upToDate = prior !== undefined && BigInt(prior.generation) >= spec.generation;
    // A replica's password arrives by replication; a new credentials generation of a replica (its primary's
    // reset) has its runtime wait for that and end the sessions opened with the old one.
    const credentialsCurrent = prior !== undefined && BigInt(prior.credentialsGeneration) >= spec.credentialsGeneration;
    // Work on a change joins the trace of the request that made it; work on an applied spec (a crashed
    // instance started again) is a trace of its own. A converge with nothing to do makes no span.
    const configCurrent = configApplied.get(spec.databaseId) === spec.configGeneration;
    const work = tracedWork("reconcile", upToDate && credentialsCurrent && configCurrent ? {} : spec.traceContext, {
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
      ...(spec.standby ? { unpublished: true } : {}),
      parameters: spec.parameters,
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
        const c: RunningPass = { spec, id, prior, upToDate, credentialsCurrent, replica, settings, work, state: await runtime.observe(id) };
        for (const step of runningSteps) if ((await step(c)) === "wait") return;
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
        // A stopped instance takes the current verifier (and tier, and configuration) when it next starts.
        configApplied.set(id, spec.configGeneration);
        pendingRestart.delete(id);
        await record();
        observe(spec, ObservedState.STOPPED, spec.credentialsGeneration);
        return;
      }
      case DesiredState.PURGED: {
        slotsSynced.delete(id);
        readOnlyApplied.delete(id);
        standbysSynced.delete(id);
        configApplied.delete(id);
        pendingRestart.delete(id);
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
        if (stopped) break;
        if (!spec) {
          if (!discards.has(id)) break;
          await acquire();
          try {
            await discard(id);
            discards.delete(id);
          } catch (err) {
            failedSteps++;
            log.warn("discarding an old primary failed; will retry", { database_id: id, error: (err as Error).message });
          } finally {
            release();
          }
          break;
        }
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
      if (busy.size === 0) {
        for (const fn of idle) fn();
        idle.clear();
      }
    }
  }

  const settled = async (): Promise<void> => {
    if (busy.size === 0) return;
    await new Promise<void>((r) => idle.add(r));
  };

  return {
    /** Replaces the desired state with a new snapshot and converges every instance in it. */
    setDesired(next: InstanceSpec[]): void {
      specs = new Map(next.map((s) => [s.databaseId, s]));
      received = true;
      for (const id of specs.keys()) void run(id);
    },
    /** Old primaries to remove (the snapshot's discards); each is removed once, then reported PURGED. */
    setDiscards(ids: readonly string[]): void {
      discards = new Set(ids.filter((id) => !specs.has(id)));
      for (const id of discards) void run(id);
    },
    /** Re-observes everything (a crashed postmaster is noticed and restarted here); old primaries left are retried. */
    resync(): void {
      if (!received) return;
      for (const id of specs.keys()) void run(id);
      for (const id of discards) void run(id);
    },
    /**
     * Converges at once every instance whose server, reported running, has exited since (a crash between two
     * heartbeats: it is started again now, not at the next `resync`). Answers how many it found.
     */
    checkServers(): number {
      let found = 0;
      for (const [id, seen] of lastRunning) {
        if (!runtime.exited(seen)) continue;
        lastRunning.delete(id);
        found++;
        void run(id);
      }
      return found;
    },
    /** Re-observes one instance now (its fencing changed: the report says so at once). */
    touch(id: string): void {
      if (specs.has(id)) void run(id);
    },
    /**
     * The running standbys' and highly available primaries' WAL positions measured again, into their
     * observations, for the heartbeat (failover compares standbys by what they reported after the lease ended).
     */
    async refreshWalPositions(): Promise<void> {
      for (const spec of specs.values()) {
        if (!spec.standby && !spec.leaseRequired) continue;
        const obs = observations.get(spec.databaseId);
        if (!obs || obs.state !== ObservedState.RUNNING) continue;
        const seen = await runtime.observe(spec.databaseId).catch(() => undefined);
        if (seen?.state === "running" && seen.walPosition !== undefined) obs.walPosition = seen.walPosition;
      }
    },
    /** Failed convergence attempts since the process started (reconcile_errors_total). */
    failedSteps(): number {
      return failedSteps;
    },
    /** The latest observation of every instance in the desired state, for the heartbeat report. */
    observations(): InstanceObservation[] {
      return [...specs.keys()].map((id) => observations.get(id)).filter((o): o is InstanceObservation => !!o);
    },
    /** Resolves when no instance's work is under way (at once when none is). */
    settled,
    /** Stops taking new work and resolves when what is under way has finished. */
    async drain(): Promise<void> {
      stopped = true;
      await settled();
    },
  };
}

export type Reconciler = ReturnType<typeof createReconciler>;
