import { setTimeout as sleep } from "node:timers/promises";
import { LOG_RETENTION_DAYS } from "@dbaas/catalogue";
import type { Logger } from "@dbaas/kit";
import type { InstanceAccess } from "../instance-access.ts";
import { pruneLogs } from "./retention.ts";

/** How often every instance's server log is pruned (retention.ts). */
export const LOG_PRUNE_INTERVAL_MS = 60_000;

/**
 * Keeps every server log of this host within 7 days and its tier's quota, every minute, whether the server runs or
 * not. A failure on one instance is logged and the others go on.
 */
export function createLogKeeper(o: {
  access: Pick<InstanceAccess, "serverLog">;
  list: () => Promise<string[]>;
  log: Logger;
  now?: () => number;
}) {
  const now = o.now ?? Date.now;
  async function pass(): Promise<number> {
    let removed = 0;
    for (const id of await o.list()) {
      try {
        const sl = await o.access.serverLog(id);
        if (!sl) continue;
        const r = await pruneLogs(sl.dir, { quotaBytes: sl.quotaBytes, maxAgeMs: LOG_RETENTION_DAYS * 86_400_000, now: now() });
        removed += r.removed.length;
        if (r.removed.length) o.log.info("server log pruned", { database_id: id, files: r.removed.length, kept_bytes: r.keptBytes });
      } catch (err) {
        o.log.warn("server log not pruned", { database_id: id, error: err });
      }
    }
    return removed;
  }
  return {
    pass,
    async run(intervalMs: number, signal: AbortSignal): Promise<void> {
      while (!signal.aborted) {
        await pass().catch((err: unknown) => o.log.warn("server log pruning failed", { error: err }));
        await sleep(intervalMs, undefined, { signal }).catch(() => {});
      }
    },
  };
}
