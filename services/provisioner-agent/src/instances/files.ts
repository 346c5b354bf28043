import { spawn } from "node:child_process";
import { open, readdir, stat, unlink } from "node:fs/promises";
import path from "node:path";
import type { ServerFiles } from "../instance-access.ts";
import { ensureOwnedDir, readOwned, writeOwned } from "../safe-fs.ts";
import { type RunAsIdentity, serverEnv } from "./run-as.ts";

export {
  chownNoFollow,
  ensureOwnedDir,
  prepareLogFile,
  readOwned,
  removeTree,
  tail,
  UnsafePathError,
  writeOwned,
} from "../safe-fs.ts";

/**
 * Atomic file writes and the small file-system helpers the instance modules
 * share. Every write into a data directory goes through {@link writeOwned},
 * so PostgreSQL never reads a half-written file; the helpers that touch a
 * server's directories without following a link are in ../safe-fs.ts.
 */

export function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export async function pathExists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

/** Makes completed renames in `dir` survive a power loss. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Files and programs as a server running as `runAs` (InstanceAccess.serverFiles). */
export function serverFilesOf(runAs: RunAsIdentity): ServerFiles {
  return {
    uid: runAs.uid,
    gid: runAs.gid,
    writeFile: (file, content, mode) => writeOwned(runAs, file, content, mode),
    async makeDir(dir) {
      if (!(await ensureOwnedDir(dir, runAs))) throw Object.assign(new Error(`EEXIST: ${dir} already exists`), { code: "EEXIST" });
    },
    readFile: (file) => readOwned(runAs, file),
    spawn: (file, args, stdio) =>
      spawn(file, args, { cwd: "/", env: serverEnv(), stdio, ...(runAs.switchUser ? { uid: runAs.uid, gid: runAs.gid } : {}) }),
  };
}

/** Temp files of our atomic writes inside a data directory, left by a crash mid-write. */
export async function removeStaleTempFiles(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    // Ours: writeOwned's `<file>.tmp-<hex>` of the configuration, signal, key and certificate files (and older agents' dot-names).
    if (/^\.?[A-Za-z0-9_.-]+\.(?:conf|signal|key|crt|cnf)\.tmp-[0-9a-f]+$/.test(name)) {
      // unlink, not rm: never descends (a directory of that name is left alone) and never follows a link.
      await unlink(path.join(dir, name)).catch(() => {});
    }
  }
}
