import type { ConnectRouter } from "@connectrpc/connect";
import { ProvisionerService } from "@dbaas/proto/provisioner";
import type { AppContext } from "./context.ts";
import { getAgentStatus } from "./handlers/get-agent-status.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) =>
  router.service(ProvisionerService, {
    getAgentStatus: getAgentStatus(ctx),
  });
