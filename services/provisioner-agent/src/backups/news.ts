import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type BackupObservation, BackupObservationSchema, BackupState, type DatabaseBackups } from "@dbaas/proto/agent";
import type { BackupRecord } from "./layout.ts";

export const toTimestamp = (d: Date | string) => timestampFromDate(typeof d === "string" ? new Date(d) : d);

/**
 * What the backup manager has to say about each database's backups: the
 * latest observation of every backup its spec lists (repeated in every report
 * until the spec drops it), and the backups retention pruned (repeated until
 * a report carrying them was delivered). Each new observation calls `notify`.
 */
export function createBackupNews(notify: () => void) {
  const current = new Map<string, Map<string, BackupObservation>>();
  const pruned = new Map<string, BackupObservation[]>();

  const observe = (id: string, obs: BackupObservation) => {
    const m = current.get(id) ?? new Map<string, BackupObservation>();
    current.set(id, m);
    m.set(obs.backupId, obs);
    notify();
  };

  return {
    /** The latest observation of backup `backupId` of `id`, if any. */
    known: (id: string, backupId: string): BackupObservation | undefined => current.get(id)?.get(backupId),
    running(id: string, backupId: string, startedAt: Date): void {
      observe(id, create(BackupObservationSchema, { backupId, state: BackupState.RUNNING, startedAt: toTimestamp(startedAt) }));
    },
    completed(id: string, r: BackupRecord): void {
      observe(
        id,
        create(BackupObservationSchema, {
          backupId: r.backupId,
          state: BackupState.COMPLETED,
          startedAt: toTimestamp(r.startedAt),
          completedAt: toTimestamp(r.stoppedAt),
          sizeBytes: BigInt(r.sizeBytes),
        }),
      );
    },
    failed(id: string, backupId: string, reason: string): void {
      observe(id, create(BackupObservationSchema, { backupId, state: BackupState.FAILED, message: reason }));
    },
    pruned(id: string, backupIds: readonly string[]): void {
      const list = pruned.get(id) ?? [];
      for (const backupId of backupIds) list.push(create(BackupObservationSchema, { backupId, state: BackupState.PRUNED }));
      pruned.set(id, list);
      notify();
    },
    /** Forgets the observations of backups the specs no longer list (`wanted` answers those they do). */
    keepOnly(wanted: (id: string) => ReadonlySet<string>): void {
      for (const [id, m] of current) {
        const keep = wanted(id);
        for (const backupId of m.keys()) if (!keep.has(backupId)) m.delete(backupId);
      }
    },
    /** What a report says of `id`'s backups. */
    of: (id: string): BackupObservation[] => [...(current.get(id)?.values() ?? []), ...(pruned.get(id) ?? [])],
    /** A report reached the databases service: its PRUNED news need not be repeated. */
    delivered(sent: readonly DatabaseBackups[]): void {
      for (const d of sent) {
        const delivered = new Set(d.backups.filter((b) => b.state === BackupState.PRUNED));
        const left = (pruned.get(d.databaseId) ?? []).filter((b) => !delivered.has(b));
        if (left.length) pruned.set(d.databaseId, left);
        else pruned.delete(d.databaseId);
      }
    },
    forget(id: string): void {
      current.delete(id);
      pruned.delete(id);
    },
  };
}

export type BackupNews = ReturnType<typeof createBackupNews>;
