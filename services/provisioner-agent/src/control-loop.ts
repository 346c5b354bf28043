import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import type { InstanceObservation } from "@dbaas/proto/agent";
import { createBackupManager } from "./backups/backup-manager.ts";
import type { AppContext } from "./context.ts";
import { walSpoolRoot } from "./instances/host.ts";
import { resolveRunAs } from "./instances/run-as.ts";
import { createReconciler, type Reconciler } from "./reconciler.ts";
import { createSampler } from "./samples/sampler.ts";

/**
 * The agent's conversation with the control plane: register, watch desired
 * state, and report observations (immediately when something changed, and as
 * a periodic heartbeat), backups (news at once, the rest every few
 * seconds) and samples (every AGENT_SAMPLE_INTERVAL_MS). Every part retries with backoff, so the agent and the databases
 * service can restart in any order.
 */
export function startControlLoop(ctx: AppContext, signal: AbortSignal) {
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
    socketDir: ctx.socketDir,
    dataDir: cfg.dataDir,
    spoolRoot: walSpoolRoot(cfg.dataDir),
    runAs: resolveRunAs(cfg.runAsUser),
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
  });

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
          },
          { timeoutMs: 10_000 },
        );
        log.info("registered", { regions: cfg.regions, versions: runtime.versions, capacity: cfg.capacity });
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
          reconciler.setDesired(msg.instances);
          backups.setDesired(msg.instances);
        }
      } catch (err) {
        if (signal.aborted) break;
        const ce = ConnectError.from(err);
        if (ce.code !== Code.Canceled) log.warn("watch stream ended; reconnecting", { error: ce.rawMessage });
      }
      await sleep(Math.min(200 * 2 ** attempt++, 3000), undefined, { signal }).catch(() => {});
    }
  };

  const heartbeat = async () => {
    while (!signal.aborted) {
      await sleep(cfg.reportIntervalMs, undefined, { signal }).catch(() => {});
      if (signal.aborted) break;
      reconciler.resync();
      try {
        await control.reportInstances({ agentId: cfg.agentId, instances: reconciler.observations() }, { timeoutMs: 10_000 });
      } catch (err) {
        log.warn("heartbeat failed", { error: ConnectError.from(err).rawMessage });
      }
    }
  };

  const sampler = createSampler({
    dataDir: cfg.dataDir,
    list: () => runtime.list(),
    counters: (ids) => ctx.proxy.counters(ids),
    send: async (samples) => {
      await control.reportSamples({ agentId: cfg.agentId, samples }, { timeoutMs: 10_000 });
    },
    clock: ctx.clock,
    log: log.child({ component: "samples" }),
  });

  const done = Promise.all([watch(), heartbeat(), sampler.run(cfg.sampleIntervalMs, signal)]);
  return {
    reconciler,
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
