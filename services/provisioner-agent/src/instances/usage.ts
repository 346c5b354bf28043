import { lstat, readdir, readFile, readlink, realpath } from "node:fs/promises";
import path from "node:path";
import type { ServerUsage } from "../instance-access.ts";
import type { Host } from "./host.ts";
import { readPidFile } from "./observe.ts";
import { processMemory } from "./procfs.ts";

/**
 * What a local server uses, for the sampler (InstanceAccess.usage): its data
 * directory's blocks (a stat walk, like `du`), /proc for CPU and memory.
 */

/** Bytes the directory tree takes on disk (allocated blocks, as `du` counts them); entries vanishing meanwhile are skipped. */
export async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      total += await directoryBytes(p);
      continue;
    }
    const st = await lstat(p).catch(() => undefined);
    if (st) total += st.blocks * 512;
  }
  return total;
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on every Linux architecture we run on). */
const TICKS_PER_SECOND = 100;

/** utime+stime of a process (and, with `reaped`, of its exited children it waited for), seconds; 0 if it is gone. */
async function cpuSeconds(pid: number, reaped: boolean): Promise<number> {
  try {
    const text = await readFile(`/proc/${pid}/stat`, "utf8");
    // Fields after the command (which may hold spaces) start at field 3.
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0);
    return ticks / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

export interface ProcessUsage {
  /** Cumulative CPU seconds of the postmaster, its live children and the children it has reaped. */
  cpuSeconds: number;
  /** Proportional memory (PSS) of those processes: shared buffers counted once, not once per backend. */
  memoryBytes: number;
}

/**
 * CPU and memory of the server whose postmaster is `pid`, if that pid is
 * still a process in `realDir` (a recycled pid is not ours). Backends that
 * exited are in the postmaster's reaped-children times, so short
 * connections' CPU is not lost between samples.
 */
export async function processUsage(pid: number, realDir: string): Promise<ProcessUsage | undefined> {
  try {
    if ((await readlink(`/proc/${pid}/cwd`)) !== realDir) return undefined;
  } catch {
    return undefined;
  }
  let children: number[] = [];
  try {
    children = (await readFile(`/proc/${pid}/task/${pid}/children`, "utf8")).split(" ").filter(Boolean).map(Number);
  } catch {
    // no children file (kernel without it): the postmaster alone, plus what it reaped
  }
  let cpu = await cpuSeconds(pid, true);
  let memoryBytes = processMemory(pid).pssBytes;
  for (const child of children) {
    cpu += await cpuSeconds(child, false);
    memoryBytes += processMemory(child).pssBytes;
  }
  return { cpuSeconds: cpu, memoryBytes };
}

/** CPU, memory and storage of instance `id`'s running server; undefined when none runs (or it stopped meanwhile). */
export async function serverUsage(host: Host, id: string): Promise<ServerUsage | undefined> {
  const dir = host.instanceDir(id);
  const pf = await readPidFile(dir, host.serverSocketDir(id)).catch(() => undefined);
  if (!pf?.port || !pf.socketDir) return undefined;
  const real = await realpath(dir).catch(() => undefined);
  if (!real) return undefined;
  const usage = await processUsage(pf.pid, real);
  if (!usage) return undefined;
  return { ...usage, storageBytes: await directoryBytes(dir) };
}
