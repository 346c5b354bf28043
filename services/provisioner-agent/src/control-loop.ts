import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import type { InstanceObservation } from "@dbaas/proto/agent";
import type { AppContext } from "./context.ts";
import { createReconciler, type Reconciler } from "./reconciler.ts";

/**
 * The agent's conversation with the control plane: register, watch desired
 * state, and report observations (immediately when something changed, and as
 * a periodic heartbeat). Every part retries with backoff, so the agent and
 * the databases service can restart in any order.
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

  const reconciler: Reconciler = createReconciler({
    runtime,
    applied: ctx.applied,
    log,
    concurrency: cfg.concurrency,
    report,
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

  const done = Promise.all([watch(), heartbeat()]);
  return {
    reconciler,
    /** Resolves after the loops ended and in-flight instance work finished. */
    async stopped(): Promise<void> {
      await done;
      await reconciler.drain();
      await flushing;
    },
  };
}
