import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { type InstanceAccess, withAgentSession } from "../instance-access.ts";
import { rand } from "../temp-name.ts";
import type { BackupRecord } from "./layout.ts";
import { lastSegmentNeeded, parseLsn, segnoOfLsn } from "./wal.ts";

/**
 * The restore window: from which instant to which a database can be restored.
 *
 * The latest restorable instant is learnt by sampling: every few seconds the
 * agent notes (time p, WAL insert position L) of a running instance. Every
 * transaction committed before p lies before L, so once all WAL up to L is
 * in the store, p is restorable; busy, the latest instant trails by about
 * archive_timeout plus an upload.
 *
 * Idle, it is now. A server at rest may still write WAL that no commit is in
 * (standby snapshots, checkpoints) and that archive_timeout never switches
 * out, so each sample also notes the transaction-id horizon. A snapshot's
 * xmax is one past the newest transaction id that has ended, and xmin = xmax
 * means every id below it has ended. When that holds at a restorable sample
 * r and a later sample s has the same xmax, no transaction holding an id
 * ended between them (one that did, with an id at or above r's xmax, would
 * have moved it), so nothing was committed between r and s — restoring to s
 * gives r's state, which is stored. Read-only transactions get no id, so a
 * database that is only read counts as idle too.
 */

export interface WalSample {
  /** ms since the epoch, taken before the position was read. */
  at: number;
  lsn: bigint;
  /** One past the newest transaction id that has ended (xmax of a snapshot taken with the position). */
  xmax?: bigint;
  /** Every transaction id below xmax had ended when the sample was taken (xmin = xmax). */
  quiet?: boolean;
}

/** Samples are kept this long at most (a busy database's latest instant trails by well under a minute). */
const KEEP_SAMPLES_MS = 15 * 60_000;

/** The highest segment `n` such that every segment from `from` to `n` is stored; `from - 1` when `from` is not. */
export function contiguousEnd(stored: ReadonlySet<number>, from: number): number {
  let n = from - 1;
  while (stored.has(n + 1)) n++;
  return n;
}

/**
 * The newest restorable sample time: the newest sample whose WAL is all
 * stored (every segment up to the one it needs is at most `end`), or a later
 * one when no transaction id was assigned in between and none was running
 * at that sample (see above). Also the samples still worth keeping: that
 * stored one and the newer ones.
 */
export function newestRestorable(samples: readonly WalSample[], end: number): { at?: number; keep: WalSample[] } {
  for (let i = samples.length - 1; i >= 0; i--) {
    const r = samples[i]!;
    if (lastSegmentNeeded(r.lsn) > end) continue;
    let at = r.at;
    if (r.quiet && r.xmax !== undefined) {
      for (const s of samples.slice(i + 1)) {
        if (s.xmax !== r.xmax) break;
        at = s.at;
      }
    }
    return { at, keep: samples.slice(i) };
  }
  return { keep: [...samples] };
}

export interface RestoreWindow {
  earliest: Date;
  latest: Date;
}

export interface WindowInputs {
  now: Date;
  /** Completed backups (their records in the store). */
  backups: readonly BackupRecord[];
  /** The newest restorable sample time, if any (from {@link newestRestorable}). */
  sampledLatest?: number;
  /** The latest instant known before (it stays restorable: retention never removes WAL after a kept backup). */
  previousLatest?: number;
  retentionDays: number;
}

/** The window now; undefined while no backup has completed (a restore starts from a base backup). */
export function restoreWindow(w: WindowInputs): RestoreWindow | undefined {
  if (w.backups.length === 0) return undefined;
  const stopped = w.backups.map((b) => Date.parse(b.stoppedAt));
  const latest = Math.max(Math.max(...stopped), w.sampledLatest ?? 0, w.previousLatest ?? 0);
  const earliest = Math.min(Math.max(w.now.getTime() - w.retentionDays * 86_400_000, Math.min(...stopped)), latest);
  return { earliest: new Date(earliest), latest: new Date(latest) };
}

/** The first segment the window needs: the oldest completed backup's start. */
export function firstSegmentNeeded(backups: readonly BackupRecord[]): number | undefined {
  if (backups.length === 0) return undefined;
  return Math.min(...backups.map((b) => segnoOfLsn(parseLsn(b.startLsn))));
}

export interface WindowKeeperOptions {
  /** How the agent reaches a running instance's server. */
  instances: Pick<InstanceAccess, "agentConnection">;
  now: () => number;
  retentionDays: number;
  /** Where the last known latest instants are kept across restarts. */
  file: string;
}

/**
 * Per database: the samples, the window last computed, and the latest
 * instant known (kept in a small file, so a restarted agent does not report
 * a shorter window for a database that is stopped and cannot be sampled).
 */
export function createWindowKeeper(o: WindowKeeperOptions) {
  const samples = new Map<string, WalSample[]>();
  const windows = new Map<string, RestoreWindow | undefined>();
  const latest = new Map<string, number>();
  const serverArchiveError = new Map<string, string>();
  let written = 0;
  let dirty = false;

  return {
    async load(): Promise<void> {
      try {
        for (const [id, t] of Object.entries(JSON.parse(await readFile(o.file, "utf8")) as Record<string, number>)) latest.set(id, t);
      } catch {
        // first start, or unreadable: windows are rebuilt from the store and new samples
      }
    },
    /** Notes (now, WAL insert position) of a running instance, and whether its server's archiver is failing. */
    async sample(id: string): Promise<void> {
      const at = o.now();
      const conn = await o.instances.agentConnection(id).catch(() => undefined);
      if (!conn) return;
      const row = await withAgentSession(
        conn,
        async (c) =>
          (
            await c.query<{ lsn: string; xmin: string; xmax: string; failing: boolean; wal: string | null }>(
              "SELECT pg_current_wal_insert_lsn()::text AS lsn, " +
                "pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax, " +
                "coalesce(last_failed_time > coalesce(last_archived_time, '-infinity'), false) AS failing, last_failed_wal AS wal " +
                "FROM pg_stat_archiver",
            )
          ).rows[0],
        2000,
      ).catch(() => undefined); // not running, starting or recovering: no sample
      if (!row) return;
      const list = samples.get(id) ?? [];
      list.push({ at, lsn: parseLsn(row.lsn), xmax: BigInt(row.xmax), quiet: row.xmin === row.xmax });
      while (list.length > 1 && list[0]!.at < at - KEEP_SAMPLES_MS) list.shift();
      samples.set(id, list);
      serverArchiveError.set(id, row.failing ? `the server failed to archive ${row.wal} (see its log)` : "");
    },
    /** Recomputes the window from the completed backups and the stored WAL. */
    update(id: string, backups: readonly BackupRecord[], stored: ReadonlySet<number>): void {
      const first = firstSegmentNeeded(backups);
      let sampledLatest: number | undefined;
      if (first !== undefined) {
        const r = newestRestorable(samples.get(id) ?? [], contiguousEnd(stored, first));
        samples.set(id, r.keep);
        sampledLatest = r.at;
      }
      const w = restoreWindow({
        now: new Date(o.now()),
        backups,
        sampledLatest,
        previousLatest: latest.get(id),
        retentionDays: o.retentionDays,
      });
      windows.set(id, w);
      if (w && w.latest.getTime() !== latest.get(id)) {
        latest.set(id, w.latest.getTime());
        dirty = true;
      }
    },
    window: (id: string) => windows.get(id),
    serverArchiveError: (id: string) => serverArchiveError.get(id) ?? "",
    /** Writes the latest instants if they changed (at most every 30 s unless forced). */
    async save(force = false): Promise<void> {
      if (!dirty || (!force && Date.now() - written < 30_000)) return;
      dirty = false;
      written = Date.now();
      await mkdir(path.dirname(o.file), { recursive: true, mode: 0o700 });
      const tmp = `${o.file}.tmp-${rand()}`;
      await writeFile(tmp, JSON.stringify(Object.fromEntries(latest)));
      await rename(tmp, o.file);
    },
    forget(id: string): void {
      samples.delete(id);
      windows.delete(id);
      serverArchiveError.delete(id);
      if (latest.delete(id)) dirty = true;
    },
  };
}

export type WindowKeeper = ReturnType<typeof createWindowKeeper>;
