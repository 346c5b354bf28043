import type { InstanceRuntime } from "../runtime.ts";
import type { InstanceManager } from "./instance-manager.ts";
import { serverDefaults } from "./parameters.ts";
import { processRunning } from "./procfs.ts";
import type { WatchdogControl } from "./watchdog.ts";

/**
 * The first {@link InstanceRuntime}: PostgreSQL servers as processes of this
 * host, from the server binaries installed with the agent, each in its own
 * data directory under the manager's root, running as the run-as user.
 * Instances live with the agent: `shutdown` stops them and the next start
 * brings them back.
 * The manager does the work; this maps the runtime's vocabulary onto it.
 * With `watchdog` (the agent's; tests may leave it out), highly available primaries are stopped when their
 * leases end while no agent runs (watchdog.ts).
 */
export function createLocalProcessRuntime(m: InstanceManager, watchdog?: WatchdogControl): InstanceRuntime {
  const versions = [...m.availableMajors].reverse();
  const { mode, reason } = m.resourceLimits;
  return {
    versions,
    isolation: m.isolation,
    resourceLimits: { enforced: mode !== "none", how: mode === "none" ? "none" : `cgroup ${mode}`, ...(reason ? { reason } : {}) },
    async prepare() {
      await m.cleanupLeftovers();
      // Before the templates (an initdb takes a while): clients of servers a crashed agent left running get back in.
      await m.serveRunning();
      // Servers from before per-server users, stopped with the previous agent, get uids of their own before they start.
      await m.ownServerUsers();
      // Templates first: then every create is a copy, not an initdb.
      for (const major of versions) await m.ensureTemplate(major);
    },
    create: (id, o) =>
      m.provision(id, { major: o.version, ...(o.restore ? { restore: o.restore } : {}), ...(o.seed ? { seed: o.seed } : {}) }),
    adopt: (id, replicaId) => m.adopt(id, replicaId),
    syncReplicationSlots: (id, slots) => m.syncReplicationSlots(id, slots),
    holdStandbySlots: (id, slots) => m.holdStandbySlots(id, slots),
    fence: (id) => m.fence(id),
    unfence: (id) => m.unfence(id),
    isFenced: (id) => m.isFenced(id),
    ...(watchdog ? { armFencing: (remaining: ReadonlyMap<string, number>) => watchdog.publish(remaining) } : {}),
    setSynchronousStandbys: (id, names) => m.setSynchronousStandbys(id, names),
    start: (id, settings) => m.start(id, settings),
    stop: (id) => m.stop(id),
    restart: (id, settings) => m.restart(id, settings),
    resize: (id, settings) => m.applyTier(id, settings),
    setPassword: (id, verifier) => m.applyPassword(id, verifier),
    setReadOnly: (id, readOnly) => m.applyReadOnly(id, readOnly),
    setParameters: (id, parameters) => m.applyParameters(id, parameters),
    serverDefaults: (tier) => serverDefaults(tier),
    observe: (id) => m.observe(id),
    exited: (seen) => seen.pid !== undefined && !processRunning(seen.pid),
    destroy: (id) => m.purge(id),
    list: () => m.listInstances(),
    caCertificatePem: () => m.caCertificatePem(),
    poolerSupport: m.poolerSupport,
    syncPooler: (id, settings) => m.syncPooler(id, settings),
    listPoolers: () => m.listPoolers(),
    removePooler: (id) => m.removePooler(id),
    walSpoolRoot: m.walSpoolRoot,
    agentConnection: (id) => m.agentConnection(id),
    adminSession: (id, fn, o) => m.adminSession(id, fn, o),
    serverFiles: (id) => m.serverFiles(id),
    usage: (id) => m.serverUsage(id),
    serverLog: (id) => m.serverLog(id),
    async shutdown() {
      await m.stopAll();
      // Every server stopped: nothing is left for the watchdog to stop (one that would not stop keeps it armed).
      await watchdog?.stop();
    },
  };
}
