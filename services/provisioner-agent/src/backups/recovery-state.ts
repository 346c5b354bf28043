import { constants } from "node:fs";
import { type FileHandle, open, readdir, rename, rm, stat, unlink } from "node:fs/promises";
import path from "node:path";
import type { ServerFiles } from "../instance-access.ts";
import { openNoFollow, removeTree, UnsafePathError } from "../safe-fs.ts";
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
 *
 * The data directory is the server's user's: it can rename `dbaas-restore` away
 * and put a link or a directory of its own in its place, though never write
 * inside the agent's. So `dbaas-restore` is opened O_DIRECTORY|O_NOFOLLOW,
 * checked to be the agent's (or the server's own, after an upgrade's chown),
 * and its files are reached through that descriptor (/proc/<pid>/fd/N/…),
 * never by a path a link could redirect.
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

/**
 * `dbaas-restore` of `dataDir` opened without following a link, if it is the agent's directory (undefined if
 * missing); `at(name)` names a file in it through the descriptor. A link or a directory of someone else's in its
 * place is refused.
 */
async function openRestoreDir(dataDir: string): Promise<{ fh: FileHandle; at: (name: string) => string } | undefined> {
  let fh: FileHandle;
  try {
    fh = await openNoFollow(restoreDir(dataDir), constants.O_RDONLY | constants.O_DIRECTORY, "the restore directory");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  const st = await fh.stat();
  // The agent's; or the server's, if an upgrade gave the whole data directory to the server's own uid mid-restore
  // (tenant-users.ts giveOwnUser). Anyone else's is not this data directory's.
  const dataOwner = (await stat(dataDir)).uid;
  if (st.uid !== process.getuid?.() && st.uid !== dataOwner) {
    await fh.close();
    throw new UnsafePathError(
      `refusing the restore directory ${restoreDir(dataDir)}: owned by uid ${st.uid}, neither the agent's nor the server's`,
    );
  }
  // Through the process's own fd directory: resolves to the opened directory whatever is at its path now.
  return { fh, at: (name) => `/proc/${process.pid}/fd/${fh.fd}/${name}` };
}

/** The marker of a restore under way, or undefined for an ordinary instance. */
export async function readRestoreMarker(dataDir: string): Promise<RestoreMarker | undefined> {
  const d = await openRestoreDir(dataDir);
  if (!d) return undefined;
  let text: string;
  try {
    const fh = await open(d.at(path.basename(markerPath(dataDir))), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      text = await fh.readFile("utf8");
    } finally {
      await fh.close();
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  } finally {
    await d.fh.close();
  }
  return JSON.parse(text) as RestoreMarker;
}

/** Written by the agent (not the run-as user), atomically, into its own `dbaas-restore` (which must exist). */
export async function writeRestoreMarker(dataDir: string, marker: RestoreMarker): Promise<void> {
  const d = await openRestoreDir(dataDir);
  if (!d) throw new Error(`cannot write the restore marker: ${restoreDir(dataDir)} is missing`);
  try {
    const name = path.basename(markerPath(dataDir));
    const tmp = d.at(`${name}.tmp-${rand()}`);
    const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      await fh.chmod(0o644);
      await fh.writeFile(`${JSON.stringify(marker, null, 2)}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, d.at(name));
  } finally {
    await d.fh.close();
  }
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
  const text = await server.readFile(pgConf);
  if (!RECOVERY_INCLUDE_RE.test(text)) await server.writeFile(pgConf, `${text.replace(/\n*$/, "\n")}${RECOVERY_INCLUDE}\n`);
}

/**
 * After promotion: the recovery settings, the fetched WAL and the marker go,
 * the marker last, so a crash half-way leaves a marker and the next start
 * finishes the cleanup. The instance is then an ordinary one.
 */
export async function finishRestore(server: ServerFiles, dataDir: string): Promise<void> {
  const pgConf = path.join(dataDir, "postgresql.conf");
  const text = await server.readFile(pgConf);
  if (RECOVERY_INCLUDE_RE.test(text)) await server.writeFile(pgConf, text.replace(RECOVERY_INCLUDE_RE, ""));
  await rm(path.join(dataDir, RECOVERY_CONF), { force: true });
  await removeConfTemps(dataDir);
  // The WAL, then the marker, through the directory's descriptor; then the directory (GNU rm: whatever is there now,
  // a link included, is removed without being followed). Someone else's directory in its place: just removed.
  const d = await openRestoreDir(dataDir).catch((e) => {
    if (e instanceof UnsafePathError) return undefined;
    throw e;
  });
  if (d) {
    try {
      await removeTree(d.at("wal"));
      await unlink(d.at(path.basename(markerPath(dataDir)))).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== "ENOENT") throw e;
      });
    } finally {
      await d.fh.close();
    }
  }
  await removeTree(restoreDir(dataDir));
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
