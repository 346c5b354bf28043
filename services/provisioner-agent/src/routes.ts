import type { ConnectRouter } from "@connectrpc/connect";
import { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { ProvisionerService } from "@dbaas/proto/provisioner";
import type { AppContext } from "./context.ts";
import { getAgentStatus } from "./handlers/get-agent-status.ts";
import { instanceAdmin } from "./handlers/instance-admin.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) => {
  router.service(ProvisionerService, {
    getAgentStatus: getAgentStatus(ctx),
  });
  router.service(InstanceAdminService, instanceAdmin(ctx));
};
