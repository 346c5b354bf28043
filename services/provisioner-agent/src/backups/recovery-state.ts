import { open, readFile, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { ServerFiles } from "../instance-access.ts";
import { rand } from "../temp-name.ts";

/**
 * What a restored instance carries in its data directory until it has been
 * promoted, and how it is cleaned up after. Everything here is written while
 * the data directory is still a staging copy (`<id>.tmp-…`), so the rename
 * into place publishes it together with the data:
 *
 *   dbaas-restore/restore.json   the marker (agent-owned): a restore is under way; its source and target
 *   dbaas-restore/wal/           the source's archived WAL, fetched and gunzip'd (agent-owned, world-readable)
 *   dbaas-recovery.conf          recovery settings, included from postgresql.conf
 *   recovery.signal              PostgreSQL's own: archive recovery pending; it removes the file when it promotes
 *
 * The marker with `recovery.signal` means "start runs (or resumes) the
 * recovery"; the marker without it means "promoted, clean up"; no marker is an
 * ordinary instance.
 */

const RESTORE_DIR = "dbaas-restore";
const RECOVERY_CONF = "dbaas-recovery.conf";
const RECOVERY_INCLUDE = `include_if_exists = '${RECOVERY_CONF}'`;
const RECOVERY_INCLUDE_RE = /^\s*include_if_exists\s*=\s*'dbaas-recovery\.conf'\s*\n?/m;

/** What PostgreSQL says when the archived WAL holds no commit after the target (see process-control's restoring start). */
export const TARGET_NOT_REACHED = "recovery ended before configured recovery target was reached";

export interface RestoreMarker {
  sourceDatabaseId: string;
  backupId: string;
  /** ISO 8601: replay stops after the last transaction committed at or before this instant. */
  restoreTime: string;
  /**
   * Replay every fetched WAL file instead of stopping at `restoreTime`: set
   * once PostgreSQL found no commit after the target in the archived WAL.
   */
  replayToEnd: boolean;
  /** How many WAL files were fetched (for progress messages). */
  walFiles: number;
}

export const restoreDir = (dataDir: string) => path.join(dataDir, RESTORE_DIR);
export const restoreWalDir = (dataDir: string) => path.join(dataDir, RESTORE_DIR, "wal");
const markerPath = (dataDir: string) => path.join(dataDir, RESTORE_DIR, "restore.json");
export const recoverySignalPath = (dataDir: string) => path.join(dataDir, "recovery.signal");

/** The marker of a restore under way, or undefined for an ordinary instance. */
export async function readRestoreMarker(dataDir: string): Promise<RestoreMarker | undefined> {
  let text: string;
  try {
    text = await readFile(markerPath(dataDir), "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  return JSON.parse(text) as RestoreMarker;
}

/** Written by the agent (not the run-as user), atomically. */
export async function writeRestoreMarker(dataDir: string, marker: RestoreMarker): Promise<void> {
  const file = markerPath(dataDir);
  const tmp = `${file}.tmp-${rand()}`;
  await writeFile(tmp, `${JSON.stringify(marker, null, 2)}\n`, { mode: 0o644 });
  const fh = await open(tmp, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}

/** postgresql.conf string literal. */
const lit = (v: string) => `'${v.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;

function renderRecoveryConf(m: RestoreMarker): string {
  const lines = [
    `# Managed by the dbaas agent while this instance is restored from ${m.sourceDatabaseId}'s backup ${m.backupId}; removed once promoted.`,
    // Relative paths: PostgreSQL runs restore_command in the data directory.
    `restore_command = ${lit(`cp "${RESTORE_DIR}/wal/%f" "%p"`)}`,
    // The source's own history (a source that was itself restored) is followed to its newest timeline.
    "recovery_target_timeline = 'latest'",
  ];
  if (m.replayToEnd) {
    lines.push(`# The archived WAL holds no commit after ${m.restoreTime}: replaying all of it is the state at that instant.`);
  } else {
    lines.push(`recovery_target_time = ${lit(m.restoreTime)}`, "recovery_target_action = 'promote'");
  }
  // No connections at all until promotion: nobody sees (or logs into) a
  // half-replayed database, and the hot-standby check that the source's
  // max_connections & co. are not larger than ours (a smaller tier) does not apply.
  lines.push("hot_standby = off");
  return `${lines.join("\n")}\n`;
}

async function removeConfTemps(dataDir: string): Promise<void> {
  for (const name of await readdir(dataDir)) {
    if (name.startsWith(`${RECOVERY_CONF}.tmp-`)) await rm(path.join(dataDir, name), { force: true });
  }
}

/** `dbaas-recovery.conf` for the marker, and its include line at the end of postgresql.conf (after dbaas.conf's, so it wins). */
export async function writeRecoveryConfig(server: ServerFiles, dataDir: string, m: RestoreMarker): Promise<void> {
  await removeConfTemps(dataDir);
  await server.writeFile(path.join(dataDir, RECOVERY_CONF), renderRecoveryConf(m));
  const pgConf = path.join(dataDir, "postgresql.conf");
  const text = await readFile(pgConf, "utf8");
  if (!RECOVERY_INCLUDE_RE.test(text)) await server.writeFile(pgConf, `${text.replace(/\n*$/, "\n")}${RECOVERY_INCLUDE}\n`);
}

/**
 * After promotion: the recovery settings, the fetched WAL and the marker go,
 * the marker last, so a crash half-way leaves a marker and the next start
 * finishes the cleanup. The instance is then an ordinary one.
 */
export async function finishRestore(server: ServerFiles, dataDir: string): Promise<void> {
  const pgConf = path.join(dataDir, "postgresql.conf");
  const text = await readFile(pgConf, "utf8");
  if (RECOVERY_INCLUDE_RE.test(text)) await server.writeFile(pgConf, text.replace(RECOVERY_INCLUDE_RE, ""));
  await rm(path.join(dataDir, RECOVERY_CONF), { force: true });
  await removeConfTemps(dataDir);
  await rm(restoreWalDir(dataDir), { recursive: true, force: true });
  await rm(markerPath(dataDir), { force: true });
  await rm(restoreDir(dataDir), { recursive: true, force: true });
}

/** Bytes of `file` from `offset` on (a server log since a start began). */
export async function readFrom(file: string, offset: number): Promise<string> {
  const fh = await open(file, "r").catch(() => undefined);
  if (!fh) return "";
  try {
    const size = (await fh.stat()).size;
    if (size <= offset) return "";
    const buf = Buffer.alloc(size - offset);
    await fh.read(buf, 0, buf.length, offset);
    return buf.toString("utf8");
  } finally {
    await fh.close();
  }
}

export async function fileSize(file: string): Promise<number> {
  return stat(file).then(
    (s) => s.size,
    () => 0,
  );
}

/** The last WAL file the server restored from the fetched archive, per its log. */
export function lastRestoredWal(log: string): string | undefined {
  let last: string | undefined;
  for (const m of log.matchAll(/restored log file "([0-9A-F]{24})" from archive/g)) last = m[1];
  return last;
}
