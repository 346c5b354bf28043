import type { Client } from "@connectrpc/connect";
import { AgentService } from "@dbaas/proto/agent";
import { type Clock, createInternalClient, createLogger, type Logger, systemClock } from "@dbaas/kit";
import { createAppliedStore, type AppliedStore } from "./applied-state.ts";
import type { BlobStore } from "./backups/blob-store.ts";
import { openBlobStore } from "./backups/open-store.ts";
import type { Config } from "./config.ts";
import { createInstanceManager } from "./instances/instance-manager.ts";
import { createLocalProcessRuntime } from "./instances/local-runtime.ts";
import type { ConnectionProxy } from "./proxy/counters.ts";
import { createConnectionMeter } from "./proxy/meter.ts";
import { createWatchdogControl } from "./instances/watchdog.ts";
import type { InstanceRuntime } from "./runtime.ts";

/** What the agent's handlers and control loop depend on, built once per process; tests pass their own parts. */
export interface AppContext {
  cfg: Config;
  log: Logger;
  /** Where instances run (runtime.ts): local PostgreSQL processes. Its `versions` are what the agent registers. */
  runtime: InstanceRuntime;
  applied: AppliedStore;
  /** The databases service's AgentService: registration, desired state, reports. */
  control: Client<typeof AgentService>;
  /** Backups and archived WAL (BACKUP_STORE_URL); restores read other databases' backups from it. */
  store: BlobStore;
  /** Serves the databases' published ports (AGENT_LISTEN_ADDRESS) and counts their bytes (`counters(ids)`): nftables or the proxy (CONNECTION_METER). */
  proxy: ConnectionProxy;
  clock: Clock;
}

export function createContext(cfg: Config, overrides: Partial<AppContext> = {}): AppContext {
  const log = overrides.log ?? createLogger("agent", { agent_id: cfg.agentId });
  const store = overrides.store ?? openBlobStore(cfg.backupStoreUrl, cfg.backupStoreEnv);
  const proxy =
    overrides.proxy ??
    createConnectionMeter({
      mode: cfg.connectionMeter,
      dataDir: cfg.dataDir,
      agentId: cfg.agentId,
      listenAddress: cfg.listenAddress,
      privateAddress: cfg.privateAddress,
      nftPath: cfg.nftPath,
      privateNetwork: cfg.privateNetwork,
      log: (msg) => log.info(msg),
    });
  const instances = createInstanceManager({
    dataDir: cfg.dataDir,
    agentId: cfg.agentId,
    runAsUser: cfg.runAsUser,
    tenantUidRange: cfg.tenantUidRange,
    listenAddress: cfg.listenAddress,
    store,
    proxy,
    replicationSecret: cfg.replicationSecret,
    privateAddress: cfg.privateAddress,
    privateNetwork: cfg.privateNetwork,
    archiveTimeoutS: cfg.backup.archiveTimeoutS,
    cgroupRoot: cfg.cgroupRoot,
    pgbouncerPath: cfg.pgbouncerPath,
    log: (msg) => log.info(msg),
  });
  return {
    cfg,
    log,
    runtime:
      overrides.runtime ??
      createLocalProcessRuntime(
        instances,
        cfg.watchdog.enabled
          ? createWatchdogControl({
              dataDir: cfg.dataDir,
              marginMs: cfg.watchdog.marginMs,
              entry: cfg.watchdog.entry,
              nodeArgs: cfg.watchdog.nodeArgs,
              log: (msg) => log.info(msg),
            })
          : undefined,
      ),
    store,
    proxy,
    clock: overrides.clock ?? systemClock,
    applied: overrides.applied ?? createAppliedStore(cfg.dataDir),
    control:
      overrides.control ??
      createInternalClient(AgentService, cfg.databasesUrl, {
        secret: cfg.internalSecret,
        caller: "agent",
        localAddress: cfg.controlSourceAddress,
      }),
  };
}
