import { constants as fsConstants } from "node:fs";
import { chmod, lstat, open, readdir, unlink } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { constants, gzip } from "node:zlib";
import type { Logger } from "@dbaas/kit";
import { INSTANCE_ID_RE as ID_RE } from "../instance-access.ts";
import { removeTree } from "../safe-fs.ts";
import type { BlobStore } from "./blob-store.ts";
import { walKey, walPrefix } from "./layout.ts";
import { isArchivedName, parseSegmentName, WAL_SEGMENT_BYTES } from "./wal.ts";

const gzipAsync = promisify(gzip);

/** basic_archive's temp files (`archtemp.<file>.<pid>.<ms>`) left by a server killed mid-copy. */
const STALE_TEMP_MS = 10 * 60_000;
/** A failing upload is retried after 1 s, 2 s, 4 s… up to this (BACKUP_UPLOAD_RETRY_MAX_MS). */
export const DEFAULT_MAX_BACKOFF_MS = 30_000;

export interface ArchiverOptions {
  /** `<AGENT_DATA_DIR>/wal-spool`: one directory per database, written by basic_archive. */
  spoolRoot: string;
  store: BlobStore;
  log: Logger;
  /** Per database. Over it the spool is closed (basic_archive fails, the server keeps WAL in pg_wal and retries). */
  maxSpoolBytes: number;
  /** Scan period. Default 1 s. */
  intervalMs?: number;
  /** How many databases upload at once. Default 2. */
  concurrency?: number;
  /** The longest wait between upload attempts of a failing spool. Default 30 s. */
  maxBackoffMs?: number;
  /** Called when a closed spool reopens, so the server retries archiving at once rather than within a minute. */
  wake?: (databaseId: string) => void;
  /**
   * The uid a database's spool files must belong to: its server's. Default:
   * the owner of its spool directory, which the agent made for that uid
   * (host.ts) and which the server cannot give away.
   */
  ownerUid?: (databaseId: string) => Promise<number>;
}

/** Why a spool entry is not uploaded: the uploader trusts nothing but the server's own regular files. */
export type RejectReason = "symlink" | "not_regular" | "foreign_owner";
export const REJECT_REASONS: readonly RejectReason[] = ["symlink", "not_regular", "foreign_owner"];

class Refused extends Error {
  constructor(readonly reason: RejectReason) {
    super(reason);
  }
}

/**
 * A spool file's bytes, read only if it is a regular file owned by `owner`:
 * opened without following a symlink (O_NOFOLLOW: ELOOP) or blocking on a
 * FIFO, then checked on the open descriptor, so a swap after the listing
 * changes nothing.
 */
async function readTrusted(file: string, owner: number): Promise<Buffer> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ELOOP") throw new Refused("symlink");
    throw e;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new Refused("not_regular");
    if (st.uid !== owner) throw new Refused("foreign_owner");
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

const reasonOf = (st: { isSymbolicLink(): boolean; isFile(): boolean; uid: number }, owner: number): RejectReason | undefined =>
  st.isSymbolicLink() ? "symlink" : !st.isFile() ? "not_regular" : st.uid !== owner ? "foreign_owner" : undefined;

export interface ArchiveStatus {
  /** Why archiving is failing; empty when it works. */
  archiveError: string;
  /** Bytes waiting in the spool. */
  spoolBytes: number;
}

interface DbState {
  /** Segment numbers stored (any timeline); loaded from the store listing, then kept up to date. */
  stored: Set<number> | undefined;
  /** That listing while in flight, shared: a second one, answered after an upload, would drop what the upload added. */
  loading: Promise<Set<number>> | undefined;
  uploadError: string;
  spoolBytes: number;
  closed: boolean;
  failures: number;
  retryAt: number;
  draining: Promise<void> | undefined;
  /** When its last pass began, in passes begun on this agent (0: never). */
  lastTurn: number;
  /** Spool entries refused, by name → `<inode>:<reason>`: each is logged and counted once. */
  rejected: Map<string, string>;
}

const gib = (n: number) => (n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : `${Math.round(n / 1024 ** 2)} MiB`);

/**
 * The WAL uploader. basic_archive copies each finished WAL file into the
 * database's spool; this uploads them gzip'd in name order (so a segment is
 * stored only after the ones before it) and deletes a spool file only after
 * its put resolved: no WAL is ever lost between the server and the store. It
 * works from the spool directories alone, so a stopped database's spool
 * still drains, and keeps, per database, which segments are stored (for the
 * restore window and for base backups waiting on their WAL).
 */
export function createArchiver(opts: ArchiverOptions) {
  const { spoolRoot, store, log, maxSpoolBytes } = opts;
  const intervalMs = opts.intervalMs ?? 1000;
  const concurrency = opts.concurrency ?? 2;
  const maxBackoffMs = opts.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
  const dbs = new Map<string, DbState>();
  const purging = new Set<string>();
  let active = 0;
  let turns = 0;
  /** The scan loop is to end. */
  let ending = false;
  /** No upload may start any more. */
  let stopped = false;
  let loop: Promise<void> | undefined;
  const stopSignal = new AbortController();
  /** Spool entries refused since the agent started, by reason (the agent's /metrics). */
  const rejectedTotals: Record<RejectReason, number> = { symlink: 0, not_regular: 0, foreign_owner: 0 };

  /** Notes a refused entry: logged and counted the first time this file is refused for this reason. */
  function refuse(id: string, s: DbState, name: string, ino: number, reason: RejectReason): void {
    const mark = `${ino}:${reason}`;
    if (s.rejected.get(name) === mark) return;
    s.rejected.set(name, mark);
    rejectedTotals[reason]++;
    log.warn("WAL spool entry refused: not a regular file of the database's server; not uploaded", {
      database_id: id,
      file: name,
      reason,
    });
  }

  const state = (id: string): DbState => {
    let s = dbs.get(id);
    if (!s) {
      s = {
        stored: undefined,
        loading: undefined,
        uploadError: "",
        spoolBytes: 0,
        closed: false,
        failures: 0,
        retryAt: 0,
        draining: undefined,
        lastTurn: 0,
        rejected: new Map(),
      };
      dbs.set(id, s);
    }
    return s;
  };

  async function loadStored(id: string, s: DbState): Promise<Set<number>> {
    if (s.stored) return s.stored;
    s.loading ??= (async () => {
      const stored = new Set<number>();
      for (const { key } of await store.list(walPrefix(id))) {
        const seg = parseSegmentName(key.slice(walPrefix(id).length).replace(/\.gz$/, ""));
        if (seg) stored.add(seg.segno);
      }
      s.stored = stored;
      return stored;
    })().finally(() => {
      s.loading = undefined;
    });
    return s.loading;
  }

  async function setClosed(id: string, s: DbState, closed: boolean): Promise<void> {
    if (s.closed === closed) return;
    // Owner bits: the run-as user owns the directory, so 0500 stops basic_archive; the agent (root or that user) still deletes.
    await chmod(path.join(spoolRoot, id), closed ? 0o500 : 0o700);
    s.closed = closed;
    if (closed) log.warn("WAL spool full; archiving paused until it drains", { database_id: id, spool_bytes: s.spoolBytes });
    else {
      log.info("WAL spool drained; archiving resumes", { database_id: id });
      opts.wake?.(id);
    }
  }

  /**
   * A closed spool (mode 0500) stops an agent that is not root from deleting
   * too (it then runs as the run-as user): open it for the unlink alone.
   */
  async function removeSpoolFile(dir: string, s: DbState, name: string): Promise<void> {
    try {
      await unlink(path.join(dir, name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EACCES" || !s.closed) throw e;
      await chmod(dir, 0o700);
      try {
        await unlink(path.join(dir, name));
      } finally {
        await chmod(dir, 0o500);
      }
    }
  }

  /** One pass over a database's spool: upload what is there, in order, then apply the bound. */
  async function drain(id: string, s: DbState): Promise<void> {
    const dir = path.join(spoolRoot, id);
    let names: string[];
    let owner: number;
    try {
      const dirStat = await lstat(dir);
      if (!dirStat.isDirectory()) throw new Error(`${dir} is not a directory`);
      // The mode is the truth about closing: it survives an agent restart.
      s.closed = (dirStat.mode & 0o200) === 0;
      owner = opts.ownerUid ? await opts.ownerUid(id) : dirStat.uid;
      names = await readdir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
      throw e;
    }
    const sizes = new Map<string, number>();
    const seen = new Set<string>();
    for (const name of names) {
      const st = await lstat(path.join(dir, name)).catch(() => undefined);
      if (!st) continue;
      const reason = reasonOf(st, owner);
      if (reason) {
        refuse(id, s, name, st.ino, reason);
        seen.add(name);
        continue;
      }
      if (name.startsWith("archtemp.") && Date.now() - st.mtimeMs > STALE_TEMP_MS) {
        await removeSpoolFile(dir, s, name).catch(() => {});
        continue;
      }
      sizes.set(name, st.size);
    }
    for (const name of s.rejected.keys()) if (!seen.has(name)) s.rejected.delete(name);
    const sum = () => [...sizes.values()].reduce((a, b) => a + b, 0);
    s.spoolBytes = sum();
    const pending = [...sizes.keys()].filter(isArchivedName).sort();
    if (pending.length > 0 && Date.now() >= s.retryAt && !stopped) {
      try {
        const stored = await loadStored(id, s);
        for (const name of pending) {
          if (stopped || purging.has(id)) break;
          let wal: Buffer;
          try {
            wal = await readTrusted(path.join(dir, name), owner);
          } catch (e) {
            // Swapped since the listing: refused like the others, and the next file's turn.
            if (!(e instanceof Refused)) throw e;
            refuse(id, s, name, (await lstat(path.join(dir, name)).catch(() => undefined))?.ino ?? 0, e.reason);
            sizes.delete(name);
            continue;
          }
          const body = await gzipAsync(wal, { level: constants.Z_BEST_SPEED });
          await store.put(walKey(id, name), body);
          // Stored: only now may the spool copy go.
          await removeSpoolFile(dir, s, name);
          sizes.delete(name);
          s.spoolBytes = sum();
          const seg = parseSegmentName(name);
          if (seg) stored.add(seg.segno);
          s.uploadError = "";
          s.failures = 0;
        }
      } catch (e) {
        s.failures++;
        s.retryAt = Date.now() + Math.min(1000 * 2 ** (s.failures - 1), maxBackoffMs);
        const msg = `WAL upload to the backup store (${store.description}) failed: ${(e as Error).message}`;
        if (msg !== s.uploadError) log.warn("WAL upload failed; retrying", { database_id: id, error: (e as Error).message });
        s.uploadError = msg;
      }
    }
    // Close while there is still room for one segment: basic_archive may copy another before the next scan.
    await setClosed(id, s, s.spoolBytes + WAL_SEGMENT_BYTES >= maxSpoolBytes);
  }

  function status(id: string): ArchiveStatus {
    const s = dbs.get(id);
    if (!s) return { archiveError: "", spoolBytes: 0 };
    const full = s.closed ? `WAL spool full (${gib(maxSpoolBytes)}); the server keeps its WAL until the spool drains` : "";
    const refused =
      s.rejected.size > 0
        ? `the WAL spool holds ${s.rejected.size} entries that are not the server's regular files, not uploaded (${[...s.rejected.keys()].sort().slice(0, 3).join(", ")})`
        : "";
    return { archiveError: [s.uploadError, full, refused].filter(Boolean).join("; "), spoolBytes: s.spoolBytes };
  }

  async function spoolIds(): Promise<string[]> {
    try {
      return (await readdir(spoolRoot, { withFileTypes: true })).filter((e) => e.isDirectory() && ID_RE.test(e.name)).map((e) => e.name);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw e;
    }
  }

  /**
   * Starts passes over the spools whose turn it is, longest waiting first: a
   * scan starts at most `concurrency` of them and an idle spool's pass ends
   * at once, so in listing order the same few spools would be drained on
   * every scan and the others never.
   */
  async function scan(): Promise<void> {
    const ids = (await spoolIds()).sort((a, b) => state(a).lastTurn - state(b).lastTurn);
    for (const id of ids) {
      const s = state(id);
      if (s.draining || purging.has(id) || active >= concurrency) continue;
      active++;
      s.lastTurn = ++turns;
      s.draining = drain(id, s)
        .catch((e) => log.warn("WAL spool scan failed", { database_id: id, error: e }))
        .finally(() => {
          active--;
          s.draining = undefined;
        });
    }
  }

  return {
    start(): void {
      loop ??= (async () => {
        while (!ending) {
          await scan().catch((e) => log.warn("WAL spool scan failed", { error: e }));
          await sleep(intervalMs, undefined, { signal: stopSignal.signal }).catch(() => {});
        }
      })();
    },
    /**
     * Ends the loop after one last pass over every spool (bounded by
     * `finalPassMs`: instances stopped just before leave their last WAL
     * there). An upload in flight finishes; its spool file is deleted only if
     * the put resolved.
     */
    async stop(finalPassMs = 15_000): Promise<void> {
      ending = true;
      stopSignal.abort();
      await loop;
      await Promise.all([...dbs.values()].map((s) => s.draining));
      const timer = setTimeout(() => (stopped = true), finalPassMs);
      try {
        const ids = await spoolIds().catch(() => [] as string[]);
        for (const id of ids) if (!stopped && !purging.has(id)) await drain(id, state(id)).catch(() => {});
      } finally {
        clearTimeout(timer);
        stopped = true;
      }
    },
    status,
    /** Spool entries refused since start, by reason. */
    rejected: (): Readonly<Record<RejectReason, number>> => ({ ...rejectedTotals }),
    /** Segment numbers of the database's WAL in the store (loaded from its listing on first use). */
    stored: (id: string): Promise<Set<number>> => loadStored(id, state(id)),
    /**
     * Resolves once every segment from `from` to `to` of `id` is stored (a base
     * backup's WAL); rejects after `timeoutMs`, with why archiving fails if it does.
     */
    async waitStored(id: string, from: number, to: number, timeoutMs: number, signal: AbortSignal): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const stored = await loadStored(id, state(id));
        let n = from;
        while (n <= to && stored.has(n)) n++;
        if (n > to) return;
        if (Date.now() > deadline) {
          const why = status(id).archiveError;
          throw new Error(`the WAL this backup needs was not stored within ${timeoutMs / 60_000} min${why ? `: ${why}` : ""}`);
        }
        await sleep(250, undefined, { signal });
      }
    },
    /** Retention removed the database's WAL below `segno`. */
    forgetBelow(id: string, segno: number): void {
      const stored = dbs.get(id)?.stored;
      if (stored) for (const n of stored) if (n < segno) stored.delete(n);
    },
    /** Stops archiving `id` and deletes its spool (a purge); resolves once no upload of it is in flight. */
    async purge(id: string): Promise<void> {
      purging.add(id);
      try {
        await dbs.get(id)?.draining;
        await removeTree(path.join(spoolRoot, id));
        dbs.delete(id);
      } finally {
        purging.delete(id);
      }
    },
  };
}

export type Archiver = ReturnType<typeof createArchiver>;
