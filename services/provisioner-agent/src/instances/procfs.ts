import { readFileSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import path from "node:path";

/** Executable of a process, as the kernel resolved it (" (deleted)" stripped: the binary may be upgraded under a running server). */
function exeOf(pid: number | string): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, "");
  } catch {
    return undefined;
  }
}

/**
 * Whether `pid` is a live server process (its executable is one of
 * `serverExes`) whose working directory is `realDir`. PostgreSQL chdirs into
 * its data directory, so this tells our postmaster apart from an unrelated
 * process that inherited a recycled pid, which `kill(pid, 0)` alone cannot.
 * Zombies have no cwd and count as dead.
 */
export function isServerProcessIn(pid: number, realDir: string, serverExes: ReadonlySet<string>): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    // EPERM: another user's process. Our server processes always run as the
    // run-as user, which we can signal, so that pid is not ours.
    return false;
  }
  try {
    if (readlinkSync(`/proc/${pid}/cwd`) !== realDir) return false;
  } catch {
    return false;
  }
  const exe = exeOf(pid);
  return exe !== undefined && serverExes.has(exe);
}

/**
 * Whether `kill(pid, 0)` would find a process, zombies and other users'
 * processes included: the same test PostgreSQL applies to its lock file.
 */
export function pidExists(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * All server processes (executable in `serverExes`) whose working directory
 * is `realDir`: a postmaster and its children, or the orphaned backends a
 * killed postmaster leaves behind, which must be gone before a new postmaster
 * can claim the shared memory. Matching the executable keeps, say, an
 * operator's shell sitting in the data directory out of it.
 */
export function serverProcessesIn(realDir: string, serverExes: ReadonlySet<string>): number[] {
  const pids: number[] = [];
  for (const name of processIds()) {
    try {
      if (readlinkSync(`/proc/${name}/cwd`) !== realDir) continue;
    } catch {
      continue; // exited meanwhile, or not ours to inspect
    }
    const exe = exeOf(name);
    if (exe !== undefined && serverExes.has(exe)) pids.push(Number(name));
  }
  return pids;
}

/**
 * The real and effective uid of a process that has not exited, or undefined when it is gone or a zombie: what a
 * purge checks before it kills a process it found in the server's cgroup (process-control.ts `killCgroupLeftovers`).
 */
export function processUids(pid: number): { real: number; effective: number } | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return undefined; // exited meanwhile
  }
  if (/^State:\s+[ZX]/m.test(status)) return undefined;
  const uids = /^Uid:\s+(\d+)\s+(\d+)/m.exec(status);
  return uids ? { real: Number(uids[1]), effective: Number(uids[2]) } : undefined;
}

/** Resident (RSS) and proportional (PSS) memory of a process, bytes; zeros if it is gone. */
export function processMemory(pid: number): { rssBytes: number; pssBytes: number } {
  let rssBytes = 0;
  let pssBytes = 0;
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    rssBytes = Number(/^Rss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    pssBytes = Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
  } catch {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      rssBytes = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
    } catch {
      // gone
    }
  }
  return { rssBytes, pssBytes };
}

/**
 * Whether `pid` is a process that has not exited: `pidExists`, less zombies (a server whose postmaster was
 * killed but not yet reaped has exited). One procfs read: cheap enough to ask for every server twice a second.
 */
export function processRunning(pid: number): boolean {
  if (!pidExists(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) S …": the state follows the last ")" (comm may hold parentheses).
    return stat.charAt(stat.lastIndexOf(")") + 2) !== "Z";
  } catch {
    // Gone between the two checks.
    return false;
  }
}

/**
 * Live PgBouncers (the program's name `pgbouncer`) whose command line names a config file below `dir`: a
 * pooler's directory (`<agent data>/poolers/<id>/`) or any directory above it (a whole agent's, a whole stack's).
 * Found by /proc rather than by pid file alone: a pid file can be lost (removed before a start, overwritten by a
 * second PgBouncer of the same directory) while the process it named still runs — and serves, and outlives
 * everything else. `dir` is matched as given and as resolved by realpath, whichever the command line holds.
 */
export function poolerProcessesBelow(dir: string): number[] {
  const prefixes = new Set([`${path.resolve(dir)}/`]);
  try {
    prefixes.add(`${realpathSync(dir)}/`);
  } catch {
    // removed already: its processes still name it as given
  }
  const pids: number[] = [];
  for (const name of processIds()) {
    let args: string[];
    try {
      args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").filter(Boolean);
    } catch {
      continue; // exited meanwhile
    }
    if (args.length < 2 || path.basename(args[0]!) !== "pgbouncer") continue;
    if (!args.slice(1).some((a) => a.endsWith(".ini") && [...prefixes].some((p) => a.startsWith(p)))) continue;
    if (processRunning(Number(name))) pids.push(Number(name));
  }
  return pids;
}

/** The ids of the processes /proc lists now (none when it cannot be read). */
function processIds(): string[] {
  try {
    return readdirSync("/proc").filter((name) => name.charCodeAt(0) >= 48 && name.charCodeAt(0) <= 57);
  } catch {
    return [];
  }
}
