import { lstat, unlink } from "node:fs/promises";
import path from "node:path";
import { fileStart, listLogFiles } from "./reader.ts";

/**
 * Retention of a server's log (docs/product.md, Inside the database): 7 days, or less when the tier's quota fills
 * first, the oldest files dropped first. Whole files go (the collector opens a new one every hour and at an eighth
 * of the quota: server-config.ts), never the newest, which the server is writing.
 */
export interface RetentionOptions {
  quotaBytes: number;
  maxAgeMs: number;
  now: number;
}

export interface Pruned {
  removed: string[];
  /** Bytes the files kept take. */
  keptBytes: number;
}

export async function pruneLogs(dir: string, o: RetentionOptions): Promise<Pruned> {
  const files = await listLogFiles(dir);
  const sizes = new Map<string, number>();
  for (const f of files) {
    const st = await lstat(path.join(dir, f)).catch(() => undefined);
    sizes.set(f, st?.isFile() ? st.size : 0);
  }
  const removed: string[] = [];
  const drop = async (f: string) => {
    await unlink(path.join(dir, f)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "ENOENT") throw e;
    });
    removed.push(f);
  };
  const kept = [...files];
  // A file's entries end when the next one starts: once that is older than the limit, the whole file is.
  while (kept.length > 1 && fileStart(kept[1]!)! < o.now - o.maxAgeMs) await drop(kept.shift()!);
  let total = kept.reduce((n, f) => n + sizes.get(f)!, 0);
  while (kept.length > 1 && total > o.quotaBytes) {
    const f = kept.shift()!;
    total -= sizes.get(f)!;
    await drop(f);
  }
  return { removed, keptBytes: total };
}
