import type { BlobStore } from "./blob-store.ts";
import { type BackupRecord, recordKey, walPrefix } from "./layout.ts";
import { parseLsn, segnoOfLsn, segnoOfWalFile } from "./wal.ts";

/**
 * Retention: a database can be restored to any instant of the last
 * `retentionDays`. That needs every backup completed in that time, plus the
 * newest one before it (a restore to the window's first instant starts
 * there), and the WAL from the oldest kept backup's start on. Everything
 * older goes.
 */

export interface RetentionPlan {
  keep: BackupRecord[];
  prune: BackupRecord[];
  /** WAL segments below this number are needed by no kept backup; undefined: prune no WAL. */
  walBefore: number | undefined;
}

export function planRetention(backups: readonly BackupRecord[], now: Date, retentionDays: number): RetentionPlan {
  const cutoff = now.getTime() - retentionDays * 86_400_000;
  const newestFirst = [...backups].sort((a, b) => Date.parse(b.stoppedAt) - Date.parse(a.stoppedAt));
  const recent = newestFirst.filter((b) => Date.parse(b.stoppedAt) >= cutoff);
  const older = newestFirst.filter((b) => Date.parse(b.stoppedAt) < cutoff);
  const keep = older.length > 0 ? [...recent, older[0]!] : recent;
  const prune = older.slice(1);
  // With no completed backup nothing is restorable yet; WAL waits for the first one.
  const walBefore = keep.length > 0 ? Math.min(...keep.map((b) => segnoOfLsn(parseLsn(b.startLsn)))) : undefined;
  return { keep, prune, walBefore };
}

/**
 * Carries out a plan in the store. A pruned backup's record goes first, so it
 * is never listed as completed without its files; its files after. Timeline
 * `.history` files stay (tiny, and a restore follows timelines with them).
 * Returns the ids of the backups removed.
 */
export async function prune(store: BlobStore, databaseId: string, plan: RetentionPlan): Promise<string[]> {
  const removed: string[] = [];
  for (const b of plan.prune) {
    await store.delete(recordKey(databaseId, b.backupId));
    await store.deletePrefix(`${databaseId}/base/${b.backupId}/`);
    removed.push(b.backupId);
  }
  if (plan.walBefore !== undefined) {
    const prefix = walPrefix(databaseId);
    for (const { key } of await store.list(prefix)) {
      const segno = segnoOfWalFile(key.slice(prefix.length));
      if (segno !== undefined && segno < plan.walBefore) await store.delete(key);
    }
  }
  return removed;
}
