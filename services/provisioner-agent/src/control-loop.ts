import { setTimeout as sleep } from "node:timers/promises";
import { TIER_NAMES } from "@dbaas/catalogue";
import { Code, ConnectError } from "@connectrpc/connect";
import type { InstanceObservation } from "@dbaas/proto/agent";
import { createBackupManager } from "./backups/backup-manager.ts";
import type { AppContext } from "./context.ts";
import { createLeaseKeeper } from "./leases.ts";
import { createReconciler, type Reconciler } from "./reconciler.ts";
import { createSampler } from "./samples/sampler.ts";
import { createPoolerKeeper } from "./poolers.ts";
import { createLogKeeper, LOG_PRUNE_INTERVAL_MS } from "./server-log/keeper.ts";
import { createTrustKeeper } from "./trusted-sources.ts";

/**
 * The agent's conversation with the control plane: register, watch desired
 * state, and report observations (immediately when something changed, and as
 * a periodic heartbeat), backups (news at once, the rest every few
 * seconds) and samples (every AGENT_SAMPLE_INTERVAL_MS), and renew the leases on highly available primaries
 * (leases.ts). Every part retries with backoff, so the agent and the databases service can restart in any order.
 */
export function startControlLoop(ctx: AppContext, signal: AbortSignal, fencedAtStart: readonly string[] = []) {
  const { cfg, log, control, runtime } = ctx;
  const pending = new Map<string, InstanceObservation>();
  let flushing: Promise<void> | undefined;

  const flush = async (): Promise<void> => {
    while (pending.size > 0 && !signal.aborted) {
      const batch = [...pending.values()];
      pending.clear();
      try {
        await control.reportInstances({ agentId: cfg.agentId, instances: batch }, { timeoutMs: 10_000 });
      } catch (err) {
        // Put back what was not delivered unless something newer arrived meanwhile.
        for (const o of batch) if (!pending.has(o.databaseId)) pending.set(o.databaseId, o);
        log.warn("report failed; retrying", { error: err });
        await sleep(1000, undefined, { signal }).catch(() => {});
      }
    }
  };
  const report = (obs: InstanceObservation) => {
    pending.set(obs.databaseId, obs);
    flushing ??= flush().finally(() => (flushing = undefined));
  };

  // Backups: every call sends the whole (small) state, so a lost report is repaired by the next one.
  let sendingBackups: Promise<void> | undefined;
  let backupsAgain = false;
  const sendBackups = () => {
    backupsAgain = true;
    sendingBackups ??= (async () => {
      for (let failures = 0; backupsAgain && !signal.aborted; ) {
        backupsAgain = false;
        const databases = backups.snapshot();
        if (databases.length === 0) continue;
        try {
          await control.reportBackups({ agentId: cfg.agentId, databases }, { timeoutMs: 10_000 });
          backups.delivered(databases);
          failures = 0;
        } catch (err) {
          if (failures++ % 20 === 0) log.warn("backup report failed; retrying", { error: ConnectError.from(err).rawMessage });
          backupsAgain = true;
          await sleep(Math.min(500 * 2 ** failures, 5000), undefined, { signal }).catch(() => {});
        }
      }
    })().finally(() => (sendingBackups = undefined));
  };
  const backups = createBackupManager({
    store: ctx.store,
    runtime,
    dataDir: cfg.dataDir,
    log: log.child({ component: "backups" }),
    clock: ctx.clock,
    settings: cfg.backup,
    notify: sendBackups,
  });
  const backupsStarted = backups.start().catch((e) => log.error("backups did not start", { error: e }));

  const reconciler: Reconciler = createReconciler({
    runtime,
    applied: ctx.applied,
    log,
    concurrency: cfg.concurrency,
    report,
    purgeBackups: (id) => backups.purge(id),
    discardBackups: (id) => backups.purge(id, { keepStore: true }),
  });

  // Highly available primaries: their leases renewed beside the watch stream, fenced when one runs out.
  const leases = createLeaseKeeper({
    runtime,
    renew: () => control.renewLeases({ agentId: cfg.agentId }, { timeoutMs: Math.max(1000, cfg.leaseRenewMs) }),
    log: log.child({ component: "leases" }),
    dataDir: cfg.dataDir,
    renewIntervalMs: cfg.leaseRenewMs,
    fenceMarginMs: cfg.leaseFenceMarginMs,
    fencedAtStart,
    onFencingChanged: (id) => reconciler.touch(id),
  });

  const poolers = createPoolerKeeper({ runtime, log: log.child({ component: "poolers" }) });
  const trust = createTrustKeeper({ proxy: ctx.proxy, clock: ctx.clock, log: log.child({ component: "trusted-sources" }) });

  /** Where this agent publishes poolers, or why it runs none (the databases service shows the reason). */
  const poolerRegistration = () => {
    const support = runtime.poolerSupport ?? { available: false, reason: "this runtime runs no poolers" };
    if (!support.available) return { poolerPortOffset: 0, poolerUnavailableReason: support.reason };
    if (cfg.poolerPortOffset === 0)
      return { poolerPortOffset: 0, poolerUnavailableReason: "poolers are off on this host (AGENT_POOLER_PORT_OFFSET=0)" };
    return { poolerPortOffset: cfg.poolerPortOffset, poolerUnavailableReason: "" };
  };

  const register = async () => {
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        await control.registerAgent(
          {
            agentId: cfg.agentId,
            regions: cfg.regions,
            capacity: cfg.capacity,
            portRangeStart: cfg.portRangeStart,
            portRangeEnd: cfg.portRangeEnd,
            versions: [...runtime.versions],
            caCertificatePem: await runtime.caCertificatePem(),
            publicAddresses: cfg.publicAddresses,
            ...poolerRegistration(),
            controlUrl: cfg.controlUrl,
            // The defaults the configuration API shows: what this agent's servers run with before overrides.
            tierSettings: TIER_NAMES.map((tier) => ({ tier, settings: runtime.serverDefaults(tier) })),
          },
          { timeoutMs: 10_000 },
        );
        log.info("registered", {
          regions: cfg.regions,
          public_addresses: cfg.publicAddresses,
          versions: runtime.versions,
          capacity: cfg.capacity,
        });
        return;
      } catch (err) {
        if (attempt === 0 || attempt % 20 === 0) log.warn("registration failed; retrying", { error: err });
        await sleep(Math.min(200 * 2 ** attempt, 3000), undefined, { signal }).catch(() => {});
      }
    }
  };

  const watch = async () => {
    let attempt = 0;
    while (!signal.aborted) {
      await register();
      try {
        for await (const msg of control.watchAssignments({ agentId: cfg.agentId }, { signal })) {
          attempt = 0;
          // Fencing first: a primary that must not take writes is fenced before anything starts it.
          leases.setDesired(msg.instances, msg.discardInstanceIds);
          // Before the reconciler: a port it serves next already admits only the trusted sources.
          trust.setDesired(msg.instances);
          reconciler.setDesired(msg.instances);
          reconciler.setDiscards(msg.discardInstanceIds);
          backups.setDesired(msg.instances);
          poolers.setDesired(msg.instances);
        }
      } catch (err) {
        if (signal.aborted) break;
        const ce = ConnectError.from(err);
        if (ce.code !== Code.Canceled) log.warn("watch stream ended; reconnecting", { error: ce.rawMessage });
      }
      await sleep(Math.min(200 * 2 ** attempt++, 3000), undefined, { signal }).catch(() => {});
    }
  };

  // A server that died between two heartbeats is started again at once: its pid is checked every AGENT_LIVENESS_INTERVAL_MS.
  const liveness = async () => {
    while (!signal.aborted) {
      await sleep(cfg.livenessIntervalMs, undefined, { signal }).catch(() => {});
      if (!signal.aborted) reconciler.checkServers();
    }
  };

  const heartbeat = async () => {
    while (!signal.aborted) {
      await sleep(cfg.reportIntervalMs, undefined, { signal }).catch(() => {});
      if (signal.aborted) break;
      reconciler.resync();
      try {
        // Fresh WAL positions: failover compares the standbys' positions reported after the primary's lease ended.
        await reconciler.refreshWalPositions();
        await control.reportInstances({ agentId: cfg.agentId, instances: reconciler.observations() }, { timeoutMs: 10_000 });
      } catch (err) {
        log.warn("heartbeat failed", { error: ConnectError.from(err).rawMessage });
      }
    }
  };

  const sampler = createSampler({
    instances: runtime,
    list: () => runtime.list(),
    counters: (ids) => ctx.proxy.counters(ids),
    send: async (samples) => {
      await control.reportSamples({ agentId: cfg.agentId, samples }, { timeoutMs: 10_000 });
    },
    clock: ctx.clock,
    log: log.child({ component: "samples" }),
  });

  const serverLogs = createLogKeeper({ access: runtime, list: () => runtime.list(), log: log.child({ component: "server-logs" }) });

  const done = Promise.all([
    watch(),
    heartbeat(),
    liveness(),
    sampler.run(cfg.sampleIntervalMs, signal),
    trust.run(cfg.trustRepairIntervalMs, signal),
    poolers.run(signal),
    leases.run(signal),
    serverLogs.run(LOG_PRUNE_INTERVAL_MS, signal),
  ]);
  return {
    reconciler,
    trust,
    poolers,
    backups,
    /** Resolves after the loops ended and in-flight instance and backup work finished (or was abandoned safely). */
    async stopped(): Promise<void> {
      await done;
      await reconciler.drain();
      await backupsStarted;
      await backups.quiesce();
      await flushing;
      await sendingBackups;
    },
    /** Stops WAL uploading after a last pass: call it once the instances have stopped. */
    async archivingStopped(): Promise<void> {
      await backupsStarted;
      await backups.stop();
    },
  };
}
