import { constants } from "node:fs";
import { mkdir, open, rm } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import type { ServerFiles } from "../instance-access.ts";
import type { RestoreRequest, SeedRequest } from "../runtime.ts";
import type { BlobStore } from "./blob-store.ts";
import { type BackupRecord, basePrefix, baseTarKey, recordKey, walPrefix } from "./layout.ts";
import { recoverySignalPath, restoreDir, restoreWalDir, writeRecoveryConfig, writeRestoreMarker } from "./recovery-state.ts";
import { extractTarGz } from "./tar.ts";
import { lastSegmentNeeded, parseLsn, parseSegmentName, segnoOfLsn } from "./wal.ts";

/**
 * Point-in-time restore, the fetching half: fills a staging data directory
 * from a source database's backups in the blob store (base backup + WAL +
 * recovery settings, see recovery-state.ts). The start that follows replays
 * and promotes (process-control.ts). The caller renames the staging directory
 * into place only when this resolves, so an interrupted fetch is redone from
 * scratch and never listed as an instance.
 */

/** Concurrent WAL downloads. */
const WAL_FETCH_CONCURRENCY = 4;
/** Files a base backup carries that belong to the source's host, not to the restored instance. */
const HOST_SPECIFIC = ["server.crt", "server.key", "postmaster.pid", "postmaster.opts", "standby.signal", "recovery.signal"];

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** What a restore replays: a base backup, and the WAL after it up to `lastSegment` (or to the archive's end). */
export interface RestorePlan {
  base: BackupRecord;
  lastSegment?: number;
}

/**
 * The newest completed backup of `sourceId` that is consistent at or before
 * `restoreTime` (its `stoppedAt`), which must hold PostgreSQL `version`.
 * Only backups with a `backup.json` are completed (layout.ts).
 *
 * When a later backup began after the target, WAL past that backup's end is
 * not fetched: a commit stamped at or before the target is written before a
 * backup that began after it (short of a backend stalled between stamping
 * its commit and writing it for the whole backup), and PostgreSQL stops at
 * the first commit past the target in WAL order anyway. That bounds a
 * restore to an old target by the daily backups' spacing, not the window.
 */
export async function planRestore(store: BlobStore, sourceId: string, restoreTime: Date, version: string): Promise<RestorePlan> {
  const records: BackupRecord[] = [];
  for (const { key } of await store.list(basePrefix(sourceId))) {
    if (!key.endsWith("/backup.json")) continue;
    const r = JSON.parse((await readAll(await store.get(key))).toString("utf8")) as BackupRecord;
    if (r.databaseId === sourceId) records.push(r);
  }
  const target = restoreTime.getTime();
  const base = records
    .filter((r) => Date.parse(r.stoppedAt) <= target)
    .sort((a, b) => Date.parse(b.stoppedAt) - Date.parse(a.stoppedAt))[0];
  if (!base) {
    const oldest = records.map((r) => r.stoppedAt).sort()[0];
    throw new Error(
      `no base backup of ${sourceId} before ${restoreTime.toISOString()}` +
        (oldest ? ` (the oldest is consistent from ${oldest})` : " (it has no completed backup)"),
    );
  }
  if (base.version !== version) {
    throw new Error(`version mismatch: backup ${base.backupId} of ${sourceId} holds PostgreSQL ${base.version}, not ${version}`);
  }
  const next = records.filter((r) => Date.parse(r.startedAt) > target).sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt))[0];
  return next ? { base, lastSegment: lastSegmentNeeded(parseLsn(next.stopLsn)) } : { base };
}

/**
 * The WAL files replay may ask for: every segment from the backup's start
 * segment on (on any timeline; up to the plan's last one) and every timeline
 * history file. `.partial` and `.backup` files are never asked for by name.
 */
export function walFilesNeeded(keys: readonly string[], sourceId: string, plan: RestorePlan): string[] {
  const prefix = walPrefix(sourceId);
  const first = segnoOfLsn(parseLsn(plan.base.startLsn));
  const last = plan.lastSegment ?? Number.POSITIVE_INFINITY;
  const names: string[] = [];
  for (const key of keys) {
    if (!key.startsWith(prefix) || !key.endsWith(".gz")) continue;
    const name = key.slice(prefix.length, -3);
    const segno = parseSegmentName(name)?.segno;
    if (/^[0-9A-F]{8}\.history$/.test(name) || (segno !== undefined && segno >= first && segno <= last)) names.push(name);
  }
  return names.sort();
}

async function fetchWal(store: BlobStore, sourceId: string, names: string[], dir: string): Promise<void> {
  const pending = [...names];
  const worker = async () => {
    for (let name = pending.shift(); name !== undefined; name = pending.shift()) {
      // World-readable: the server's restore_command copies from here (others cannot enter its 0700 data directory).
      // New files only, never through a link: the directory is the agent's, inside the server's data directory.
      const out = await open(path.join(dir, name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
      try {
        await pipeline(await store.get(`${walPrefix(sourceId)}${name}.gz`), createGunzip(), out.createWriteStream());
      } finally {
        await out.close().catch(() => {});
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(WAL_FETCH_CONCURRENCY, pending.length) }, worker));
}

export interface StageRestoreOptions {
  store: BlobStore;
  /** As the new instance's server: it owns the staging directory and everything extracted into it. */
  server: ServerFiles;
  /** The staging data directory: exists, empty, owned by the server's user, mode 0700. */
  dir: string;
  /** The PostgreSQL major the new instance is created with. */
  version: string;
  request: RestoreRequest;
  log: (msg: string) => void;
}

/** Fills `o.dir` with the source's data as of its chosen base backup, the WAL to replay, and the recovery settings. */
export async function stageRestore(o: StageRestoreOptions): Promise<void> {
  const { store, dir, server, request } = o;
  const source = request.sourceDatabaseId;
  // "2025-01-31 12:00:00.123+00": PostgreSQL 16 refuses ISO 8601's "T…Z" form here.
  const target = request.restoreTime.toISOString().replace("T", " ").replace("Z", "+00");
  const plan = await planRestore(store, source, request.restoreTime, o.version);
  const record = plan.base;
  o.log(`restore from ${source} to ${target}: base backup ${record.backupId} (consistent from ${record.stoppedAt})`);

  const started = Date.now();
  await extractTarGz(await store.get(baseTarKey(source, record.backupId)), dir, server);
  const major = (await server.readFile(path.join(dir, "PG_VERSION")).catch(() => "?")).trim();
  if (major !== o.version) throw new Error(`base backup ${record.backupId} of ${source} holds PostgreSQL ${major}, not ${o.version}`);
  for (const name of HOST_SPECIFIC) await rm(path.join(dir, name), { force: true });

  const names = walFilesNeeded(
    (await store.list(walPrefix(source))).map((b) => b.key),
    source,
    plan,
  );
  // Agent-owned (the server cannot alter what it replays), readable by the server.
  await mkdir(restoreDir(dir), { mode: 0o755 });
  await mkdir(restoreWalDir(dir), { mode: 0o755 });
  await fetchWal(store, source, names, restoreWalDir(dir));
  o.log(`restore from ${source}: base backup and ${names.length} WAL files fetched in ${Date.now() - started} ms`);

  const marker = { sourceDatabaseId: source, backupId: record.backupId, restoreTime: target, replayToEnd: false, walFiles: names.length };
  await writeRestoreMarker(dir, marker);
  await writeRecoveryConfig(server, dir, marker);
  await server.writeFile(recoverySignalPath(dir), "");
}

export interface StageSeedOptions {
  store: BlobStore;
  /** As the new instance's server: it owns the staging directory and everything extracted into it. */
  server: ServerFiles;
  /** The staging data directory: exists, empty, owned by the server's user, mode 0700. */
  dir: string;
  version: string;
  seed: SeedRequest;
  log: (msg: string) => void;
}

/**
 * Fills `o.dir` with a replica's data: the primary's base backup, extracted
 * as a restore does, without WAL. The backup began after the replica's slot
 * existed, so the primary still holds every WAL file from the backup's start
 * on and the replica's first start streams them.
 */
export async function stageSeed(o: StageSeedOptions): Promise<void> {
  const { store, dir, seed } = o;
  const primary = seed.primaryDatabaseId;
  let record: BackupRecord;
  try {
    record = JSON.parse((await readAll(await store.get(recordKey(primary, seed.backupId)))).toString("utf8")) as BackupRecord;
  } catch (e) {
    throw new Error(`seed backup ${seed.backupId} of ${primary} is not in the backup store (${(e as Error).message})`);
  }
  if (record.version !== o.version) {
    throw new Error(`version mismatch: backup ${seed.backupId} of ${primary} holds PostgreSQL ${record.version}, not ${o.version}`);
  }
  const started = Date.now();
  await extractTarGz(await store.get(baseTarKey(primary, seed.backupId)), dir, o.server);
  for (const name of HOST_SPECIFIC) await rm(path.join(dir, name), { force: true });
  o.log(`seeded from ${primary}'s backup ${seed.backupId} (from ${record.startLsn}) in ${Date.now() - started} ms`);
}
