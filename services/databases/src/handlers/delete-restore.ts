import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { callerKey, conflict, notFound, permissionDenied, withTransaction, withTransactionRetried } from "@dbaas/kit";
import { DeleteDatabaseResponseSchema, type DeleteDatabaseRequest, type RestoreDatabaseRequest } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { lockDeleted, lockOwned, markDeleted, nameTaken, setStatus, undelete } from "../db/databases.ts";
import { notifyAgent } from "../db/notify.ts";
import { startOperation } from "../db/operations.ts";
import { removeStaleRecordsSoon } from "../dns/records.ts";
import { TRANSITIONS, transitionFrom } from "../lifecycle.ts";
import { toDatabase } from "../mappers.ts";
import { purgeReplicasOf } from "../replicas.ts";

/**
 * Deletes a database (from any status): gone from get and list at once, its
 * instance stopped, its data kept for the retention window (by the context's
 * clock) and then purged. Its replicas are deleted with it and purged at
 * once: a copy needs no retention. Their host names' DNS records go once
 * the delete committed.
 */
export function deleteDatabase(ctx: AppContext) {
  return async (req: DeleteDatabaseRequest) => {
    await withTransactionRetried(ctx.pool, async (db) => {
      const row = await lockOwned(db, req.organizationId, req.id);
      const { to, desired } = TRANSITIONS.delete;
      transitionFrom("delete", row.status);
      const deleted = await markDeleted(db, row.id, desired, ctx.clock.now(), ctx.cfg.retentionSeconds);
      await setStatus(db, deleted, to);
      await startOperation(db, row.id, "delete", deleted.generation);
      await notifyAgent(db, row.agent_id);
      await purgeReplicasOf(ctx, db, row.id);
    });
    await removeStaleRecordsSoon(ctx);
    return create(DeleteDatabaseResponseSchema, {});
  };
}

/** Support's undo of a delete within the retention window: live and starting again. Only internal caller `support` may. */
export function restoreDatabase(ctx: AppContext) {
  return async (req: RestoreDatabaseRequest, handlerCtx: HandlerContext) => {
    if (handlerCtx.values.get(callerKey) !== "support") throw permissionDenied("restore is a support operation");
    try {
      const row = await withTransaction(ctx.pool, async (db) => {
        const found = await lockDeleted(db, req.id);
        if (!found) throw notFound("deleted database within its retention window");
        const { to, desired } = TRANSITIONS.restore;
        transitionFrom("restore", found.status);
        const restored = await undelete(db, found.id, desired);
        await setStatus(db, restored, to);
        await startOperation(db, restored.id, "restore", restored.generation);
        await notifyAgent(db, restored.agent_id);
        return { ...restored, status: to };
      });
      return { database: toDatabase(row, ctx.cfg.databaseDomain) };
    } catch (err) {
      if (nameTaken(err)) throw conflict("a live database of the organization now has the same name; rename it first");
      throw err;
    }
  };
}
