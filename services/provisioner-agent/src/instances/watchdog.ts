import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, readdirSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/*
 * The fencing watchdog (docs/decisions.md, "The watchdog: fencing without the agent"). The agent fences its highly
 * available primaries before their leases end (leases.ts), but only while it runs: an agent SIGKILLed (or hung) with
 * its postmasters alive would leave them taking writes after a standby is promoted. This is Patroni's watchdog
 * without /dev/watchdog: one small process per agent (per data directory), started detached (its own session, so
 * it outlives the agent's death and its process group) and found again by the next agent process through its pid
 * file, never started twice. The agent publishes, atomically, the lease end of each primary that may take writes
 * (`leases/watchdog.json`, rewritten at every renewal; a primary the agent has fenced is left out); when one is
 * reached less AGENT_WATCHDOG_MARGIN_MS and no newer lease was published, the watchdog stops that postmaster with
 * a fast shutdown (SIGINT: new connections refused and every session ended at once, the standbys still sent what
 * it wrote). The agent, once back, starts it fenced and does what it does after any fence: unfenced if its lease is
 * renewed, discarded if a failover moved it.
 *
 * Clock: lease ends are CLOCK_MONOTONIC milliseconds (process.hrtime: libuv reads CLOCK_MONOTONIC, one clock for
 * every process of the host), valid for the boot they were written in (the file names it). The agent counts a lease
 * from when it sent the renewal on its own monotonic clock, as leases.ts always did; only durations cross hosts,
 * so what is assumed is the control plane's clock running at the agent's rate, as before.
 */

/** Below the agent's data directory. Written by the agent only (root or the agent's uid; tenants cannot write here). */
export const WATCHDOG_FILE = "leases/watchdog.json";
const PID_FILE = "leases/watchdog.pid";
const LOG_FILE = "leases/watchdog.log";
/** The watchdog's argument naming its agent's data directory (also how its process is recognised). */
export const DATA_DIR_ARG = "--agent-data-dir";
const POLL_MS = 100;
const PID_CHECK_MS = 1000;
const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/** CLOCK_MONOTONIC in ms, the same for every process of the host. */
export const monotonicMs = (): number => Number(process.hrtime.bigint() / 1000n) / 1000;

function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

/** What the agent publishes. */
export interface WatchdogFile {
  bootId: string;
  /** The agent process that wrote it (for people reading it). */
  agentPid: number;
  /** Each primary is stopped at its lease end less this. */
  marginMs: number;
  /** Primary id → CLOCK_MONOTONIC ms at which its lease ends, as its agent counts it. */
  leaseEndsAt: Record<string, number>;
}

async function writeAtomic(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, file);
}

/** The process's command line (NUL-separated arguments), or undefined when it is gone. */
function cmdlineOf(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a live watchdog of `dataDir` (its command line says so: a recycled pid is not taken for it). */
export function isWatchdogOf(pid: number, dataDir: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const args = cmdlineOf(pid);
  if (!args) return false;
  const i = args.indexOf(DATA_DIR_ARG);
  if (i < 0 || args[i + 1] !== path.resolve(dataDir)) return false;
  try {
    // A zombie (exited, not yet reaped) has an empty command line, so this is a live process.
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function pidInFile(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(dataDir, PID_FILE), "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** The watchdog of `dataDir` that runs now, by its pid file, or undefined. */
export function runningWatchdog(dataDir: string): number | undefined {
  const pid = pidInFile(dataDir);
  return pid !== undefined && isWatchdogOf(pid, dataDir) ? pid : undefined;
}

/** How the agent starts its watchdog: `process.execPath` with `nodeArgs` (tsx's loader, if the entry is TypeScript), then `entry`. */
export interface WatchdogCommand {
  entry: string;
  nodeArgs: readonly string[];
}

export interface WatchdogOptions extends WatchdogCommand {
  dataDir: string;
  /** AGENT_WATCHDOG_MARGIN_MS: a primary is stopped this long before its lease ends. */
  marginMs: number;
  log: (msg: string) => void;
}

/** The agent's side: publishing lease ends, and the watchdog process kept running while any primary is armed. */
export interface WatchdogControl {
  /**
   * `remaining`: each primary that may take writes now, with the ms left until its lease ends (≤ 0: ended). Resolves
   * once the file is in place (and, when any is armed, a watchdog runs); a primary left out is never stopped.
   */
  publish(remaining: ReadonlyMap<string, number>): Promise<void>;
  /** The watchdog started unless it runs (found by its pid file); answers its pid. */
  ensureRunning(): Promise<number>;
  /** Nothing armed any more, and the watchdog stopped (the agent's orderly shutdown, its servers stopped). */
  stop(): Promise<void>;
}

export function createWatchdogControl(o: WatchdogOptions): WatchdogControl {
  const dataDir = path.resolve(o.dataDir);
  const file = path.join(dataDir, WATCHDOG_FILE);
  let known: number | undefined;

  async function ensureRunning(): Promise<number> {
    if (known !== undefined && isWatchdogOf(known, dataDir)) return known;
    const found = runningWatchdog(dataDir);
    if (found !== undefined) {
      if (known === undefined) o.log(`watchdog: found running (pid ${found})`);
      known = found;
      return found;
    }
    // Its own session (setsid): a kill of the agent or of its process group does not reach it. Nothing of the
    // agent's environment (its secrets) goes with it. Its output (what it did, or why it could not start) goes to
    // its log file; the agent's working directory, where a loader such as tsx is found.
    await mkdir(path.join(dataDir, "leases"), { recursive: true, mode: 0o700 });
    const out = openSync(path.join(dataDir, LOG_FILE), "a", 0o600);
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(process.execPath, [...o.nodeArgs, o.entry, DATA_DIR_ARG, dataDir], {
        detached: true,
        stdio: ["ignore", out, out],
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      });
    } finally {
      closeSync(out);
    }
    child.unref();
    const pid = child.pid;
    if (pid === undefined) throw new Error("watchdog: could not be started");
    child.on("error", (e) => o.log(`watchdog: ${e.message}`));
    child.on("exit", (code, signal) => {
      if (known === pid) o.log(`watchdog: pid ${pid} exited (${signal ?? code}); see ${path.join(dataDir, LOG_FILE)}`);
    });
    // Claimed here, so that a publish right after does not start a second one; the watchdog writes it too.
    await writeAtomic(path.join(dataDir, PID_FILE), `${pid}\n`);
    known = pid;
    o.log(`watchdog: started (pid ${pid}; stops a primary ${o.marginMs} ms before its lease ends unrenewed)`);
    return pid;
  }

  return {
    async publish(remaining) {
      const now = monotonicMs();
      const leaseEndsAt: Record<string, number> = {};
      for (const [id, ms] of [...remaining].sort(([a], [b]) => a.localeCompare(b))) {
        if (!ID.test(id)) continue;
        leaseEndsAt[id] = Math.round(now + ms);
      }
      const body: WatchdogFile = { bootId: bootId(), agentPid: process.pid, marginMs: o.marginMs, leaseEndsAt };
      const armed = Object.keys(leaseEndsAt).length > 0;
      // An agent without highly available primaries never had a file: it needs neither file nor watchdog.
      if (!armed && !existsSync(file)) return;
      await writeAtomic(file, `${JSON.stringify(body)}\n`);
      // One that cannot start is said, not waited for: the file is what keeps the order with fencing, and a primary
      // kept fenced for want of a watchdog would be an outage of its own (Patroni's watchdog mode "automatic").
      if (armed) await ensureRunning().catch((e: unknown) => o.log(`watchdog: could not be started: ${(e as Error).message}`));
    },
    ensureRunning,
    async stop() {
      await writeAtomic(
        file,
        `${JSON.stringify({ bootId: bootId(), agentPid: process.pid, marginMs: o.marginMs, leaseEndsAt: {} })}\n`,
      ).catch(() => {});
      const pid = runningWatchdog(dataDir);
      if (pid === undefined) return;
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        return;
      }
      for (const end = Date.now() + 5000; Date.now() < end && isWatchdogOf(pid, dataDir); ) await sleep(20);
      o.log(`watchdog: stopped (pid ${pid})`);
    },
  };
}

/** The postmaster(s) running in `realDir`: PostgreSQL chdirs into its data directory; a backend's parent runs there too. */
export function postmastersIn(realDir: string): number[] {
  const server = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/cwd`) !== realDir) continue;
      if (path.basename(readlinkSync(`/proc/${name}/exe`).replace(/ \(deleted\)$/, "")) !== "postgres") continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid …: the fields after comm's closing parenthesis.
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue;
      server.set(Number(name), Number(ppid));
    } catch {
      // exited meanwhile
    }
  }
  return [...server].filter(([, ppid]) => !server.has(ppid)).map(([pid]) => pid);
}

export interface WatchdogRun {
  dataDir: string;
  /** Where it says what it did (default: stdout, which the agent points at `leases/watchdog.log`). */
  log?: (entry: Record<string, unknown>) => void;
  signal?: AbortSignal;
}

/**
 * The watchdog's loop (watchdog-main.ts): every 100 ms the published lease ends; a primary whose lease end less the
 * margin has passed, and that was not stopped since that moment, gets its postmaster stopped (SIGINT). Ends when
 * its agent's data directory is gone, when another watchdog took its pid file, or on SIGTERM.
 */
export async function runWatchdog(o: WatchdogRun): Promise<string> {
  const dataDir = path.resolve(o.dataDir);
  const log =
    o.log ??
    ((entry: Record<string, unknown>) =>
      process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), pid: process.pid, ...entry })}\n`));
  const other = runningWatchdog(dataDir);
  if (other !== undefined && other !== process.pid) {
    log({ msg: "another watchdog runs for this data directory; leaving", other });
    return "another runs";
  }
  await writeAtomic(path.join(dataDir, PID_FILE), `${process.pid}\n`);
  const boot = bootId();
  log({ msg: "watchdog running", data_dir: dataDir });
  /** Per primary: when it was last stopped (monotonic ms); a lease end before that is not acted on again. */
  const stoppedAt = new Map<string, number>();
  let published: WatchdogFile | undefined;
  let lastPidCheck = monotonicMs();
  while (!o.signal?.aborted) {
    try {
      statSync(dataDir);
    } catch {
      log({ msg: "the agent's data directory is gone; leaving" });
      return "data directory gone";
    }
    const now = monotonicMs();
    if (now - lastPidCheck >= PID_CHECK_MS) {
      lastPidCheck = now;
      const owner = pidInFile(dataDir);
      if (owner !== process.pid) {
        if (owner !== undefined && isWatchdogOf(owner, dataDir)) {
          log({ msg: "another watchdog took over; leaving", other: owner });
          return "superseded";
        }
        await writeAtomic(path.join(dataDir, PID_FILE), `${process.pid}\n`).catch(() => {});
      }
    }
    try {
      const read = JSON.parse(readFileSync(path.join(dataDir, WATCHDOG_FILE), "utf8")) as WatchdogFile;
      // Written before a reboot: no postmaster of that boot runs, and its clock is not this one.
      published = read.bootId === boot ? read : undefined;
    } catch {
      // No file yet (nothing armed), or an unreadable one: the last one read holds (writes are atomic).
    }
    for (const [id, endsAt] of Object.entries(published?.leaseEndsAt ?? {})) {
      const due = endsAt - (published?.marginMs ?? 0);
      if (!ID.test(id) || now < due || (stoppedAt.get(id) ?? Number.NEGATIVE_INFINITY) >= due) continue;
      stoppedAt.set(id, now);
      let dir: string;
      try {
        dir = realpathSync(path.join(dataDir, "instances", id));
      } catch {
        log({ msg: "lease ended unrenewed; no data directory", database_id: id });
        continue;
      }
      const pids = postmastersIn(dir);
      for (const pid of pids) {
        try {
          // Fast shutdown: connections refused from now on, every session ended; the standbys get what it wrote.
          process.kill(pid, "SIGINT");
        } catch (e) {
          log({ msg: "could not stop the postmaster", database_id: id, postmaster: pid, error: (e as Error).message });
        }
      }
      log({
        msg: pids.length > 0 ? "lease ended unrenewed: postmaster stopped (fast shutdown)" : "lease ended unrenewed; no postmaster runs",
        database_id: id,
        postmasters: pids,
        late_ms: Math.round(now - due),
        before_lease_end_ms: Math.round(endsAt - now),
      });
    }
    await sleep(POLL_MS, undefined, o.signal ? { signal: o.signal } : {}).catch(() => {});
  }
  return "stopped";
}

/** The watchdog's log lines (for the agent's tests and operators). */
export async function watchdogLog(dataDir: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path.join(dataDir, LOG_FILE), "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
