import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { rand } from "../temp-name.ts";

/**
 * After this many attempts at one backup it is reported failed (an attempt
 * cut short by a crash of the agent counts; one ended by the instance's own
 * stop or restart does not, see backup-manager.ts).
 */
export const BACKUP_ATTEMPTS = 3;

export interface AttemptRecord {
  backupId: string;
  attempts: number;
  /** Why the last attempt failed; a crash mid-way leaves the default. */
  lastError: string;
}

/**
 * How often each database's current backup was attempted, in one small file
 * per database under `dir`, counted before an attempt starts so a kill -9
 * half-way counts too and the count survives restarts.
 */
export function createAttemptLog(dir: string) {
  const file = (id: string) => path.join(dir, `${id}.json`);

  async function read(id: string, backupId: string): Promise<AttemptRecord> {
    const fresh = { backupId, attempts: 0, lastError: "interrupted: the agent stopped during the backup" };
    try {
      const r = JSON.parse(await readFile(file(id), "utf8")) as AttemptRecord;
      return r.backupId === backupId ? r : fresh;
    } catch {
      return fresh;
    }
  }

  async function write(id: string, r: AttemptRecord): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = `${file(id)}.tmp-${rand()}`;
    await writeFile(tmp, JSON.stringify(r));
    await rename(tmp, file(id));
  }

  return {
    read,
    /** Counts an attempt about to start; returns the record with the new count. */
    async begin(id: string, backupId: string): Promise<AttemptRecord> {
      const r = await read(id, backupId);
      const next = { ...r, attempts: r.attempts + 1, lastError: "interrupted: the agent stopped during the backup" };
      await write(id, next);
      return next;
    },
    async failed(id: string, backupId: string, reason: string): Promise<void> {
      await write(id, { ...(await read(id, backupId)), lastError: reason });
    },
    /** An attempt the agent itself cut short (shutdown) does not count. */
    async uncount(id: string, backupId: string): Promise<void> {
      const r = await read(id, backupId);
      await write(id, { ...r, attempts: Math.max(0, r.attempts - 1) });
    },
    async clear(id: string): Promise<void> {
      await rm(file(id), { force: true });
    },
    /** Removes temp files of writes a crash interrupted. */
    async sweep(): Promise<void> {
      const names = await readdir(dir).catch(() => [] as string[]);
      for (const n of names) if (n.includes(".tmp-")) await rm(path.join(dir, n), { force: true });
    },
  };
}

export type AttemptLog = ReturnType<typeof createAttemptLog>;
