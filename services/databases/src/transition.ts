import { withTransaction } from "@dbaas/kit";
import { requireAllowance } from "./allowance.ts";
import type { AppContext } from "./context.ts";
import { lockOwned, setStatus, updateSpec, type DatabaseRow } from "./db/databases.ts";
import { lockStandbys } from "./db/high-availability.ts";
import { notifyAgent } from "./db/notify.ts";
import { startOperation } from "./db/operations.ts";
import { transitionFrom } from "./lifecycle.ts";
import { coupleReplicas } from "./replicas.ts";

/** The operations that move a live database through a transitional status to where its agent takes it. */
export type Move = "start" | "stop" | "restart" | "resize";

/**
 * Moves the organization's database `id` by `op` (a resize to `tier`), if the
 * lifecycle table allows it from its status: a new spec for its agent (the
 * generation bumped), the transitional status shown until the agent reports,
 * and an operation that report settles. A stop or start reaches the
 * database's replicas in the same transaction.
 */
export function transition(ctx: AppContext, orgId: string, id: string, op: Move, tier?: string): Promise<DatabaseRow> {
  return withTransaction(ctx.pool, async (db) => {
    const row = await lockOwned(db, orgId, id);
    const t = transitionFrom(op, row.status);
    // Starting it, or running it at another tier, must fit the organization's allowance.
    const starts = t.desired === "running" && row.desired_state !== "running";
    const resizesRunning = tier !== undefined && row.desired_state === "running";
    if (starts || resizesRunning) {
      await requireAllowance(db, ctx.billing, ctx.log, orgId, { tier: tier ?? row.tier, replaces: row.id });
    }
    const updated = await updateSpec(db, id, { desired: t.desired, tier });
    const status = t.to ?? row.status;
    await setStatus(db, updated, status);
    await startOperation(db, id, op, updated.generation);
    await notifyAgent(db, updated.agent_id);
    // Replicas and standbys follow their primary's stop and start; a restart leaves them alone.
    if (op === "stop" || op === "start") await coupleReplicas(db, id, op);
    // A standby must carry the primary's load after a failover: it follows a resize (replicas keep their tier).
    if (op === "resize" && tier !== undefined) {
      for (const s of await lockStandbys(db, id)) {
        if (s.tier === tier) continue;
        const resized = await updateSpec(db, s.id, { tier });
        // Billing meters it at the new tier from now (a status event carries the tier).
        await setStatus(db, resized, resized.status, resized.status_reason);
        await notifyAgent(db, s.agent_id);
      }
    }
    return { ...updated, status, status_reason: "" };
  });
}
