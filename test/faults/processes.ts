import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { findServerBinaries } from "../../services/provisioner-agent/src/instances/binaries.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pid on the first line of a pid file (ours, or PostgreSQL's postmaster.pid). */
export function pidIn(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, "utf8").split("\n")[0]!.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function ppidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

const serverExes = new Set([...findServerBinaries().values()].map((b) => realpathSync(b.postgres)));

/**
 * PostgreSQL server processes below `dataDir` that belong to no running
 * postmaster: a postmaster not named by its directory's postmaster.pid, or a
 * process whose parent is not that postmaster (the backends of a killed one).
 */
export function orphanedPostgres(dataDir: string): string[] {
  const root = realpathSync(dataDir);
  const found: string[] = [];
  for (const name of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    const pid = Number(name);
    let cwd: string;
    let exe: string;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
      exe = readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, "");
    } catch {
      continue;
    }
    if (!serverExes.has(exe) || !cwd.startsWith(`${root}/`) || !alive(pid)) continue;
    const postmaster = pidIn(join(cwd, "postmaster.pid"));
    try {
      if (postmaster !== undefined && alive(postmaster) && (pid === postmaster || ppidOf(pid) === postmaster)) continue;
    } catch {
      continue; // exited meanwhile
    }
    found.push(`pid ${pid} in ${cwd} (postmaster.pid names ${postmaster ?? "none"})`);
  }
  return found;
}

/** Any process still running from `dataDir` (its working directory or command line): after a clean stop there is none. */
export function processesUnder(dataDir: string): string[] {
  const root = realpathSync(dataDir);
  const found: string[] = [];
  for (const name of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    const pid = Number(name);
    if (pid === process.pid || !alive(pid)) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      const cwd = readlinkSync(`/proc/${pid}/cwd`);
      if (cwd === root || cwd.startsWith(`${root}/`) || cmd.includes(root)) found.push(`pid ${pid}: ${cmd.slice(0, 120)}`);
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return found;
}

/** A redis-server of our own on `port`, so the suite can kill it without touching anyone else's. */
export async function startRedis(port: number, dir: string): Promise<ChildProcess> {
  if (!existsSync("/usr/bin/redis-server") && !process.env.PATH?.split(":").some((p) => existsSync(join(p, "redis-server")))) {
    throw new Error("redis-server is not installed (apt-get install redis-server)");
  }
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
    stdio: "ignore",
  });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const up = await new Promise<boolean>((done) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.end();
        done(true);
      });
      s.on("error", () => done(false));
    });
    if (up) return child;
    await sleep(50);
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server did not listen on ${port}`);
}
