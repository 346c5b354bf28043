import { create } from "@bufbuild/protobuf";
import { GetAgentStatusResponseSchema, ObservedInstanceSchema, type GetAgentStatusResponse } from "@dbaas/proto/provisioner";
import type { AppContext } from "../context.ts";

/** What this agent runs: its regions and every instance on its runtime, as observed now (`npm run agent:status`). */
export function getAgentStatus(ctx: AppContext) {
  return async (): Promise<GetAgentStatusResponse> => {
    const ids = await ctx.runtime.list();
    const instances = await Promise.all(
      ids.map(async (id) => {
        const o = await ctx.runtime.observe(id);
        return create(ObservedInstanceSchema, { databaseId: id, state: o.state, port: o.port ?? 0, pid: o.pid ?? 0 });
      }),
    );
    return create(GetAgentStatusResponseSchema, { agentId: ctx.cfg.agentId, regions: ctx.cfg.regions, instances });
  };
}
