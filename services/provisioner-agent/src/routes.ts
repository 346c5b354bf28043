import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { GetAgentStatusResponseSchema, ObservedInstanceSchema, ProvisionerService } from "@dbaas/proto/provisioner";
import type { AgentContext } from "./context.ts";

export const routes = (ctx: AgentContext) => (router: ConnectRouter) => {
  router.service(ProvisionerService, {
    async getAgentStatus() {
      const ids = await ctx.manager.listInstances();
      const instances = await Promise.all(
        ids.map(async (id) => {
          const o = await ctx.manager.observe(id);
          return create(ObservedInstanceSchema, { databaseId: id, state: o.state, pid: o.pid ?? 0 });
        }),
      );
      return create(GetAgentStatusResponseSchema, { agentId: ctx.cfg.agentId, regions: ctx.cfg.regions, instances });
    },
  });
};
