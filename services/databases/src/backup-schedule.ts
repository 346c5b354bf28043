import { newId, withTransaction } from "@dbaas/kit";
import type { AppContext } from "./context.ts";
import { abandonBackups, dueBackups, insertBackup, lockSchedule } from "./db/backups.ts";
import { notifyAgent } from "./db/notify.ts";
import { finishBackupOperation, startBackupOperation } from "./db/operations.ts";
import { lockPrimariesAwaitingSeed } from "./db/replicas.ts";
import { reconcileSeeds, SEED_ATTEMPTS } from "./replicas.ts";

/** A database gets a scheduled backup this long after its newest completed or running one started. */
export const BACKUP_EVERY_S = 24 * 3600;
/** And this long after a failed one, sooner than the day. */
export const BACKUP_RETRY_S = 3600;

/**
 * One pass of the backup schedule, by the context's clock: the running backups
 * of databases no longer meant to run are failed (their agent will not take
 * them), then every running database due a backup gets a `scheduled` one — the
 * first as soon as it runs, then daily, an hour after a failure — at most
 * BACKUP_MAX_RUNNING_PER_AGENT running per agent, the longest due first, so
 * databases created together do not all back up at once. Replicas' seeds
 * are brought up to date before (replicas.ts reconcileSeeds). Passes are
 * serialized across replicas. Answers how many backups it started.
 */
export async function scheduleBackups(ctx: AppContext): Promise<number> {
  return await withTransaction(ctx.pool, async (db) => {
    await lockSchedule(db);
    const now = ctx.clock.now();
    for (const abandoned of await abandonBackups(db, now)) await finishBackupOperation(db, abandoned.id, abandoned.failure_reason);
    // Replicas' seeds first: a seed is asked for, a backup that ended settles one, before scheduled backups take the slot.
    for (const primary of await lockPrimariesAwaitingSeed(db, SEED_ATTEMPTS)) await reconcileSeeds(ctx, db, primary);
    const due = await dueBackups(db, now, {
      maxPerAgent: ctx.cfg.backupMaxRunningPerAgent,
      dailyS: BACKUP_EVERY_S,
      retryS: BACKUP_RETRY_S,
    });
    const agents = new Set<string>();
    let started = 0;
    for (const d of due) {
      const backup = await insertBackup(db, { id: newId("bkp"), databaseId: d.database_id, type: "scheduled", startedAt: now });
      // A manual backup started meanwhile: that one counts.
      if (!backup) continue;
      await startBackupOperation(db, d.database_id, backup.id, d.generation);
      agents.add(d.agent_id);
      started++;
    }
    for (const agentId of agents) await notifyAgent(db, agentId);
    return started;
  });
}
