import { create } from "@bufbuild/protobuf";
import { GetAgentStatusResponseSchema, ObservedInstanceSchema, type GetAgentStatusResponse } from "@dbaas/proto/provisioner";
import type { AppContext } from "../context.ts";

/** What this agent runs: its regions, public address, own pid and every instance on its runtime, as observed now (`npm run agent:status`). */
export function getAgentStatus(ctx: AppContext) {
  return async (): Promise<GetAgentStatusResponse> => {
    const ids = await ctx.runtime.list();
    const instances = await Promise.all(
      ids.map(async (id) => {
        const o = await ctx.runtime.observe(id);
        return create(ObservedInstanceSchema, { databaseId: id, state: o.state, port: o.port ?? 0, pid: o.pid ?? 0 });
      }),
    );
    const limits = ctx.runtime.resourceLimits;
    return create(GetAgentStatusResponseSchema, {
      agentId: ctx.cfg.agentId,
      regions: ctx.cfg.regions,
      instances,
      isolation: ctx.runtime.isolation,
      publicAddresses: ctx.cfg.publicAddresses,
      pid: process.pid,
      resourceLimits: limits.how,
      resourceLimitsReason: limits.reason ?? "",
    });
  };
}
