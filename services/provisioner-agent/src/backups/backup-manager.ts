import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { type Clock, type Logger, tracedWork } from "@dbaas/kit";
import { BackupState, type DatabaseBackups, DatabaseBackupsSchema, DesiredState, type InstanceSpec } from "@dbaas/proto/agent";
import { withAgentSession } from "../instance-access.ts";
import { removeTree } from "../safe-fs.ts";
import type { InstanceRuntime } from "../runtime.ts";
import { createArchiver } from "./archiver.ts";
import { BACKUP_ATTEMPTS, createAttemptLog } from "./attempts.ts";
import { clearBackupLeftovers, stagingDirOf, takeBaseBackup } from "./base-backup.ts";
import type { BlobStore } from "./blob-store.ts";
import { type BackupRecord, basePrefix, databasePrefix } from "./layout.ts";
import { createBackupNews, toTimestamp } from "./news.ts";
import { planRetention, prune } from "./retention.ts";
import { createWindowKeeper } from "./window.ts";

export interface BackupSettings {
  /** Per database; over it archiving pauses (the server keeps its WAL) and archive_error says why. */
  maxSpoolBytes: number;
  retentionDays: number;
  pruneIntervalMs: number;
  /** Base backups at once on this agent. */
  concurrency: number;
  /** The longest wait between WAL upload attempts while the store fails (default 30 s). */
  uploadRetryMaxMs?: number;
}

export interface BackupManagerOptions {
  store: BlobStore;
  /**
   * Where instances run: a backup starts only on one observed running; its
   * sessions, its server's files and its WAL spool are reached through the
   * runtime's InstanceAccess (instance-access.ts), nothing else.
   */
  runtime: InstanceRuntime;
  /** AGENT_DATA_DIR: staging, attempt counts and the last known windows live below it. */
  dataDir: string;
  log: Logger;
  clock: Clock;
  settings: BackupSettings;
  /** Something worth reporting happened (backup news, or a periodic tick): send {@link BackupManager.snapshot}. */
  notify: () => void;
  /** Sampling, window and backup scheduling period. Default 5 s. */
  tickMs?: number;
  /** WAL spool scan period. Default 1 s. */
  archiveIntervalMs?: number;
  /** A failed backup is tried again after this times its attempts so far. Default 10 s. */
  retryDelayMs?: number;
}

/** How long a finished base backup waits for its WAL to be stored before the attempt fails. */
const WAL_WAIT_MS = 5 * 60_000;
/** How long a failed attempt's server may refuse connections (shutting down) before the failure counts as the backup's. */
const SHUTDOWN_WAIT_MS = 15_000;

/**
 * Everything backup on one agent: WAL archiving (archiver.ts), the base
 * backups the databases service asks for (base-backup.ts), each database's
 * restore window (window.ts), retention (retention.ts) and purges, and what
 * the agent reports about them. Driven by the desired state, as the
 * reconciler is; all it must remember across a crash is in the store plus
 * small files under AGENT_DATA_DIR (attempt counts, last known windows).
 */
export function createBackupManager(opts: BackupManagerOptions) {
  const { store, log, clock, settings } = opts;
  const tickMs = opts.tickMs ?? 5000;
  const retryDelayMs = opts.retryDelayMs ?? 10_000;
  const stagingRoot = path.join(opts.dataDir, "backup-staging");
  const attempts = createAttemptLog(path.join(opts.dataDir, "backups", "attempts"));
  const { runtime } = opts;
  const windows = createWindowKeeper({
    instances: runtime,
    now: () => clock.now().getTime(),
    retentionDays: settings.retentionDays,
    file: path.join(opts.dataDir, "backups", "latest-restore-times.json"),
  });
  let specs = new Map<string, InstanceSpec>();
  const records = new Map<string, BackupRecord[]>();
  const news = createBackupNews(opts.notify);
  const running = new Map<string, { backupId: string; abort: AbortController; done: Promise<void> }>();
  /** When a database's failed backup may be tried again (a restart or a short outage should not use up its attempts). */
  const retryAt = new Map<string, number>();
  const purging = new Set<string>();
  /** Databases whose backups are being settled right now (setDesired and the tick both do it). */
  const scheduling = new Set<string>();
  const stop = new AbortController();
  let loops: Promise<unknown> | undefined;

  /** Attempts ended since the agent started: completed, or failed (each failed attempt; the third fails the backup). */
  const outcomes = { completed: 0, failed: 0 };
  const archiver = createArchiver({
    spoolRoot: runtime.walSpoolRoot,
    store,
    log,
    maxSpoolBytes: settings.maxSpoolBytes,
    intervalMs: opts.archiveIntervalMs,
    maxBackoffMs: settings.uploadRetryMaxMs,
    wake: (id) => {
      // A reload wakes the server's archiver, which otherwise retries a failed file only after a minute.
      if (specs.get(id)?.desiredState !== DesiredState.RUNNING) return;
      void runtime
        .agentConnection(id)
        .then((conn) => conn && withAgentSession(conn, (c) => c.query("SELECT pg_reload_conf()")))
        .catch(() => {});
    },
  });

  async function loadRecords(id: string): Promise<BackupRecord[]> {
    const have = records.get(id);
    if (have) return have;
    const list: BackupRecord[] = [];
    for (const { key } of await store.list(basePrefix(id))) {
      if (!key.endsWith("/backup.json")) continue;
      const chunks: Buffer[] = [];
      for await (const c of await store.get(key)) chunks.push(c as Buffer);
      list.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as BackupRecord);
    }
    records.set(id, list);
    return list;
  }

  function startBackup(spec: InstanceSpec, backupId: string): void {
    const id = spec.databaseId;
    const abort = new AbortController();
    const signal = AbortSignal.any([abort.signal, stop.signal]);
    const done = (async () => {
      const obs = await runtime.observe(id);
      if (obs.state !== "running" || obs.message) return;
      const connection = await runtime.agentConnection(id);
      if (!connection) return;
      const serverFiles = await runtime.serverFiles(id);
      const server = obs.pid;
      const attempt = await attempts.begin(id, backupId);
      const startedAt = clock.now();
      news.running(id, backupId, startedAt);
      log.info("base backup started", { database_id: id, backup_id: backupId, attempt: attempt.attempts });
      // Joins the trace of the request that asked for the backup (none for a scheduled one).
      const work = tracedWork("backup", spec.traceContext, { "dbaas.database_id": id, "dbaas.backup_id": backupId });
      try {
        // A replica is seeded from a backup that began after its slot existed: the slot keeps the WAL it streams from.
        // Without slots to ensure the reconciler's sync suffices: right after an agent restart this one raced the
        // reconciler's (both ALTER the replication role: "tuple concurrently updated") and cost the backup an attempt.
        if (spec.replicationSlots.length > 0)
          await work.step("replication slots", () => runtime.syncReplicationSlots(id, spec.replicationSlots));
        const rec = await work.step("base backup", () =>
          takeBaseBackup({
            store,
            databaseId: id,
            backupId,
            version: spec.version,
            connection,
            stagingRoot,
            server: serverFiles,
            waitForWal: (from, to, s) => archiver.waitStored(id, from, to, WAL_WAIT_MS, s),
            now: () => clock.now(),
            signal,
          }),
        );
        const recs = await loadRecords(id);
        recs.push(rec);
        await attempts.clear(id);
        // The report that says "completed" carries the window the backup opens.
        windows.update(id, recs, await archiver.stored(id));
        news.completed(id, rec);
        log.info("base backup completed", { database_id: id, backup_id: backupId, size_bytes: rec.sizeBytes, stop_lsn: rec.stopLsn });
        outcomes.completed++;
        work.end();
      } catch (e) {
        work.end(e);
        if (signal.aborted) {
          await attempts.uncount(id, backupId);
          return;
        }
        const reason = (e as Error).message;
        if (await serverWentAway(id, server)) {
          // A stop, restart or resize of the instance ended the backup's connection: not the backup's failure.
          // It is taken again (from scratch) once the instance runs, which scheduleBackups waits for.
          await attempts.uncount(id, backupId);
          log.info("base backup interrupted by the instance stopping; it is retried once the instance runs", {
            database_id: id,
            backup_id: backupId,
            error: reason,
          });
          return;
        }
        await attempts.failed(id, backupId, reason);
        log.warn("base backup failed", { database_id: id, backup_id: backupId, attempt: attempt.attempts, error: reason });
        outcomes.failed++;
        if (attempt.attempts >= BACKUP_ATTEMPTS) await giveUp(id, backupId, reason);
        else retryAt.set(id, Date.now() + retryDelayMs * attempt.attempts);
      }
    })()
      .catch((e) => log.warn("base backup step failed", { database_id: id, backup_id: backupId, error: e }))
      .finally(() => running.delete(id));
    running.set(id, { backupId, abort, done });
  }

  /**
   * Whether the server an attempt ran on was stopped (or restarted) meanwhile:
   * stopped, or running as another postmaster. A server still shutting down
   * looks running but refuses connections, so that is waited out (bounded).
   * A crash is not: its server is seen crashed (the reconciler restarts it
   * only after its next observation), and a backup that crashes its server
   * must use up its attempts rather than be retried forever.
   */
  async function serverWentAway(id: string, pid: number | undefined): Promise<boolean> {
    const deadline = Date.now() + SHUTDOWN_WAIT_MS;
    for (;;) {
      const now = await runtime.observe(id);
      if (now.state === "stopped" || now.state === "absent") return true;
      if (now.state !== "running") return false;
      if (pid !== undefined && now.pid !== undefined && now.pid !== pid) return true;
      if (!now.message || Date.now() > deadline) return false;
      await sleep(250);
    }
  }

  async function giveUp(id: string, backupId: string, reason: string): Promise<void> {
    news.failed(id, backupId, reason);
    // No record was written, so nothing lists it; its files are of no use.
    await store.deletePrefix(`${id}/base/${backupId}/`).catch(() => {});
  }

  /** Settles the backups a running database's spec lists: known outcome, or the next one to take. */
  async function scheduleBackups(spec: InstanceSpec): Promise<void> {
    const id = spec.databaseId;
    if (spec.desiredState !== DesiredState.RUNNING || spec.replicaOf || running.has(id) || purging.has(id) || scheduling.has(id)) return;
    scheduling.add(id);
    try {
      await settleBackups(spec);
    } finally {
      scheduling.delete(id);
    }
  }

  async function settleBackups(spec: InstanceSpec): Promise<void> {
    const id = spec.databaseId;
    for (const backupId of spec.backupIds) {
      const known = news.known(id, backupId);
      if (known && known.state !== BackupState.RUNNING) continue;
      const recs = await loadRecords(id);
      const rec = recs.find((r) => r.backupId === backupId);
      if (rec) {
        if (!known) news.completed(id, rec);
        continue;
      }
      const a = await attempts.read(id, backupId);
      if (a.attempts >= BACKUP_ATTEMPTS) {
        await giveUp(id, backupId, a.lastError);
        continue;
      }
      if (running.size >= settings.concurrency || stop.signal.aborted || Date.now() < (retryAt.get(id) ?? 0)) return;
      startBackup(spec, backupId);
      return;
    }
  }

  async function tick(): Promise<void> {
    for (const spec of specs.values()) {
      const id = spec.databaseId;
      // A replica has no backups of its own (a standby archives nothing): nothing to keep track of.
      if (spec.desiredState === DesiredState.PURGED || spec.replicaOf || purging.has(id)) continue;
      try {
        if (spec.desiredState === DesiredState.RUNNING) await windows.sample(id);
        windows.update(id, await loadRecords(id), await archiver.stored(id));
        await scheduleBackups(spec);
      } catch (e) {
        log.warn("backup bookkeeping failed", { database_id: id, error: e });
      }
    }
    await windows.save().catch((e) => log.warn("could not save restore windows", { error: e }));
    opts.notify();
  }

  async function pruneAll(): Promise<void> {
    for (const spec of specs.values()) {
      const id = spec.databaseId;
      if (spec.desiredState === DesiredState.PURGED || purging.has(id)) continue;
      try {
        const backups = await loadRecords(id);
        const plan = planRetention(backups, clock.now(), settings.retentionDays);
        const removed = await prune(store, id, plan);
        // Drop what was pruned from the list as it is now: a backup that completed during the (slow) deletes
        // was added to it meanwhile and is not in the plan.
        const gone = new Set(removed);
        records.set(
          id,
          (records.get(id) ?? backups).filter((r) => !gone.has(r.backupId)),
        );
        if (plan.walBefore !== undefined) archiver.forgetBelow(id, plan.walBefore);
        if (removed.length === 0) continue;
        log.info("backups pruned by retention", { database_id: id, backup_ids: removed });
        news.pruned(id, removed);
      } catch (e) {
        log.warn("retention failed", { database_id: id, error: e });
      }
    }
  }

  const every = async (ms: number, fn: () => Promise<void>) => {
    while (!stop.signal.aborted) {
      await fn();
      await sleep(ms, undefined, { signal: stop.signal }).catch(() => {});
    }
  };

  /**
   * Takes no more backups: the loops end, a backup in flight is abandoned
   * (its walsender ended, its attempt not counted). WAL keeps being
   * uploaded until {@link stop}, so instances stopped after this leave
   * nothing behind in their spools.
   */
  async function quiesce(): Promise<void> {
    if (!stop.signal.aborted) {
      stop.abort();
      for (const id of running.keys()) {
        const connection = await runtime.agentConnection(id).catch(() => undefined);
        if (connection) await clearBackupLeftovers({ connection, stagingRoot, databaseId: id }).catch(() => {});
      }
    }
    await Promise.all([...running.values()].map((r) => r.done));
    await loops;
  }

  return {
    async start(): Promise<void> {
      // A kill -9 mid-backup leaves staging files; their attempt was counted when it began.
      await removeTree(stagingRoot);
      await attempts.sweep();
      await windows.load();
      archiver.start();
      loops = Promise.all([every(tickMs, tick), every(settings.pruneIntervalMs, pruneAll)]);
    },
    /** The desired state, as the reconciler gets it: backups are taken for databases desired running only. */
    setDesired(next: readonly InstanceSpec[]): void {
      specs = new Map(next.map((s) => [s.databaseId, s]));
      news.keepOnly((id) => new Set(specs.get(id)?.backupIds ?? []));
      for (const spec of specs.values()) void scheduleBackups(spec).catch(() => {});
    },
    /** Base backup attempts this process saw end, by how they ended (for `base_backups_total`). */
    outcomes(): Readonly<{ completed: number; failed: number }> {
      return outcomes;
    },
    /** WAL spool entries the uploader refused since start (symlinks, foreign files), by reason (for `wal_files_refused_total`). */
    walFilesRefused: () => archiver.rejected(),
    /** One DatabaseBackups per database in the desired state (purged ones aside). */
    snapshot(): DatabaseBackups[] {
      const out: DatabaseBackups[] = [];
      for (const spec of specs.values()) {
        const id = spec.databaseId;
        if (spec.desiredState === DesiredState.PURGED || spec.replicaOf) continue;
        const w = windows.window(id);
        const st = archiver.status(id);
        out.push(
          create(DatabaseBackupsSchema, {
            databaseId: id,
            backups: news.of(id),
            ...(w ? { earliestRestoreTime: toTimestamp(w.earliest), latestRestoreTime: toTimestamp(w.latest) } : {}),
            archiveError: st.archiveError || windows.serverArchiveError(id),
            spoolBytes: BigInt(st.spoolBytes),
          }),
        );
      }
      return out;
    },
    /** A snapshot reached the databases service: its PRUNED news need not be repeated. */
    delivered: news.delivered,
    /**
     * Removes a purged database's backups: its spool, then everything under its prefix in the store. With
     * `keepStore` (an old primary discarded after a failover: the database lives on elsewhere, its backups
     * with it) only what is on this host: the spool (its WAL never uploaded), staging, attempts, the window.
     */
    async purge(id: string, opts: { keepStore?: boolean } = {}): Promise<void> {
      purging.add(id);
      try {
        const r = running.get(id);
        r?.abort.abort();
        await r?.done;
        await archiver.purge(id);
        if (!opts.keepStore) await store.deletePrefix(databasePrefix(id));
        await removeTree(stagingDirOf(stagingRoot, id));
        await attempts.clear(id);
        for (const m of [records, retryAt]) m.delete(id);
        news.forget(id);
        windows.forget(id);
      } finally {
        purging.delete(id);
      }
    },
    quiesce,
    /** {@link quiesce}, then a last bounded upload pass over every spool. */
    async stop(): Promise<void> {
      await quiesce();
      await archiver.stop();
      await windows.save(true).catch(() => {});
    },
  };
}

export type BackupManager = ReturnType<typeof createBackupManager>;
