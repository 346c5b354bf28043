import { spawn } from "node:child_process";
import { appendFile, chmod, chown, mkdir, open, readFile, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { ServerFiles } from "../instance-access.ts";
import { rand } from "../temp-name.ts";
import { type RunAsIdentity, serverEnv } from "./run-as.ts";

/**
 * Atomic file writes and the small file-system helpers the instance modules
 * share. Every write into a data directory goes through {@link writeOwned},
 * so PostgreSQL never reads a half-written file.
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

/** The end of a log file, for error messages; empty when it cannot be read. */
export async function tail(file: string, chars = 2000): Promise<string> {
  try {
    const s = await readFile(file, "utf8");
    return s.slice(-chars).trim();
  } catch {
    return "";
  }
}

/** Write-then-rename so PostgreSQL never reads a half-written file, owned by the run-as user. */
export async function writeOwned(runAs: RunAsIdentity, file: string, content: string, mode = 0o600): Promise<void> {
  const tmp = `${file}.tmp-${rand()}`;
  try {
    await writeFile(tmp, content, { mode });
    await chmod(tmp, mode);
    if (runAs.switchUser) await chown(tmp, runAs.uid, runAs.gid);
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/** Files and programs as a server running as `runAs` (InstanceAccess.serverFiles). */
export function serverFilesOf(runAs: RunAsIdentity): ServerFiles {
  return {
    uid: runAs.uid,
    gid: runAs.gid,
    writeFile: (file, content, mode) => writeOwned(runAs, file, content, mode),
    async makeDir(dir) {
      await mkdir(dir, { mode: 0o700 });
      if (runAs.switchUser) await chown(dir, runAs.uid, runAs.gid);
    },
    spawn: (file, args, stdio) =>
      spawn(file, args, { cwd: "/", env: serverEnv(), stdio, ...(runAs.switchUser ? { uid: runAs.uid, gid: runAs.gid } : {}) }),
  };
}

/** A log file the server (running as the run-as user) can append to. */
export async function prepareLogFile(runAs: RunAsIdentity, file: string): Promise<void> {
  await appendFile(file, "", { mode: 0o600 });
  if (runAs.switchUser) await chown(file, runAs.uid, runAs.gid);
}

/** Temp files of our atomic writes inside a data directory, left by a crash mid-write. */
export async function removeStaleTempFiles(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    if (/^(?:\.server\.(?:crt|key)|\.req\.cnf|pg_hba\.conf|dbaas\.conf|dbaas-archive\.conf|postgresql\.conf)\.tmp-[0-9a-f]+$/.test(name)) {
      await rm(path.join(dir, name), { force: true });
    }
  }
}
