import { invalidArgument, Validator, notFound } from "@dbaas/kit";
import { TIERS } from "@dbaas/catalogue";
import type { ResizeDatabaseRequest, RestartDatabaseRequest, StartDatabaseRequest, StopDatabaseRequest } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { findOwned } from "../db/databases.ts";
import { configFitsTier } from "../inside/config.ts";
import { toDatabase } from "../mappers.ts";
import { transition, type Move } from "../transition.ts";

/** Start, stop and restart: each a transition of the lifecycle table, settled by the agent's report. */
function move(ctx: AppContext, op: Exclude<Move, "resize">) {
  return async (req: StartDatabaseRequest | StopDatabaseRequest | RestartDatabaseRequest) => {
    const row = await transition(ctx, req.organizationId, req.id, op);
    return { database: toDatabase(row, ctx.cfg.databaseDomain) };
  };
}

export const startDatabase = (ctx: AppContext) => move(ctx, "start");
export const stopDatabase = (ctx: AppContext) => move(ctx, "stop");
export const restartDatabase = (ctx: AppContext) => move(ctx, "restart");

/** Another tier, running or stopped: it returns to where it was. The same tier is a validation error, not a no-op. */
export function resizeDatabase(ctx: AppContext) {
  return async (req: ResizeDatabaseRequest) => {
    const v = new Validator();
    v.oneOf(
      "tier",
      req.tier,
      TIERS.map((t) => t.name),
    );
    v.throwIfAny();
    const current = await findOwned(ctx.pool, req.organizationId, req.id);
    if (!current) throw notFound("database");
    if (current.tier === req.tier) new Validator().add("tier", `is already ${req.tier}`).throwIfAny();
    // The customer's configuration goes along (docs/product.md, Inside the database): it must fit the new tier.
    const misfit = await configFitsTier(ctx, current.id, req.tier);
    if (misfit.length > 0) throw invalidArgument(misfit);
    const row = await transition(ctx, req.organizationId, req.id, "resize", req.tier);
    return { database: toDatabase(row, ctx.cfg.databaseDomain) };
  };
}
