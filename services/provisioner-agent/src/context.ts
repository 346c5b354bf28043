import type { Client } from "@connectrpc/connect";
import { AgentService } from "@dbaas/proto/agent";
import { createInternalClient, createLogger, type Logger } from "@dbaas/kit";
import { createAppliedStore, type AppliedStore } from "./applied-state.ts";
import type { Config } from "./config.ts";
import { createInstanceManager } from "./instances/instance-manager.ts";
import { createLocalProcessRuntime } from "./instances/local-runtime.ts";
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
}

export function createContext(cfg: Config, overrides: Partial<AppContext> = {}): AppContext {
  const log = overrides.log ?? createLogger("agent", { agent_id: cfg.agentId });
  return {
    cfg,
    log,
    runtime:
      overrides.runtime ??
      createLocalProcessRuntime(
        createInstanceManager({
          dataDir: cfg.dataDir,
          agentId: cfg.agentId,
          runAsUser: cfg.runAsUser,
          listenAddress: cfg.listenAddress,
          log: (msg) => log.info(msg),
        }),
      ),
    applied: overrides.applied ?? createAppliedStore(cfg.dataDir),
    control: overrides.control ?? createInternalClient(AgentService, cfg.databasesUrl, { secret: cfg.internalSecret, caller: "agent" }),
  };
}
