import type { Client } from "@connectrpc/connect";
import { AgentService } from "@dbaas/proto/agent";
import { createInternalClient, createLogger, type Logger } from "@dbaas/kit";
import { createAppliedStore } from "./applied-state.ts";
import type { Config } from "./config.ts";
import { createInstanceManager, findServerBinaries, type InstanceManager } from "./instances/index.ts";

export interface AgentContext {
  cfg: Config;
  log: Logger;
  manager: InstanceManager;
  applied: ReturnType<typeof createAppliedStore>;
  control: Client<typeof AgentService>;
  /** Major versions whose server binaries this host has. */
  versions: string[];
}

export function createContext(cfg: Config, log = createLogger("agent", { agent_id: cfg.agentId })): AgentContext {
  return {
    cfg,
    log,
    manager: createInstanceManager({
      dataDir: cfg.dataDir,
      agentId: cfg.agentId,
      runAsUser: cfg.runAsUser,
      listenAddress: cfg.listenAddress,
      log: (msg) => log.info(msg),
    }),
    applied: createAppliedStore(cfg.dataDir),
    control: createInternalClient(AgentService, cfg.databasesUrl, { secret: cfg.internalSecret, caller: "agent" }),
    versions: [...findServerBinaries().keys()].sort().reverse(),
  };
}
