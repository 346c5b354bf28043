import type { ConnectRouter } from "@connectrpc/connect";
import { AgentService } from "@dbaas/proto/agent";
import { DatabasesService } from "@dbaas/proto/databases";
import type { AppContext } from "./context.ts";
import { agentHandlers } from "./handlers/agents.ts";
import { databasesHandlers } from "./handlers/databases.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) => {
  router.service(DatabasesService, databasesHandlers(ctx));
  router.service(AgentService, agentHandlers(ctx));
};
