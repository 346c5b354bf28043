import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { findServerBinaries } from "../../services/provisioner-agent/src/instances/binaries.ts";
import { isServerProcessIn, poolerProcessesBelow, serverProcessesIn } from "../../services/provisioner-agent/src/instances/procfs.ts";
import { runningWatchdog } from "../../services/provisioner-agent/src/instances/watchdog.ts";

/**
 * What a run of the local stack leaves in `<dataDir>/run/`: `stack.pid` (the
 * runner) and one `<process>.pid` per child. A runner killed with SIGKILL
 * cannot clean up after itself; the next `npm start` (or `npm run stop`)
 * reads these files and the `postmaster.pid` of every PostgreSQL below the
 * data directory to find what is still running and stop it.
 */
const runDir = (dataDir: string) => join(dataDir, "run");
const RUNNER_FILE = "stack.pid";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pid on the first line of `file` (ours hold only that; postmaster.pid starts with it). */
function readPid(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, "utf8").split("\n")[0]!.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

/** Alive and not a zombie (a zombie holds nothing: no port, no file, no shared memory). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/**
 * Whether `pid` is a Node process this repository started (the runner or one
 * of its children): same executable as ours, working directory `root`, and
 * `marker` on its command line. A pid recycled by an unrelated process fails this.
 */
function isOurNode(pid: number, root: string, marker: string): boolean {
  if (!running(pid)) return false;
  try {
    if (readlinkSync(`/proc/${pid}/exe`) !== realpathSync(process.execPath)) return false;
    if (readlinkSync(`/proc/${pid}/cwd`) !== realpathSync(root)) return false;
  } catch {
    return false;
  }
  return cmdline(pid).some((arg) => arg.includes(marker));
}

/** The pid of a runner that is still running from this data directory, if any. */
export function liveRunner(dataDir: string, root: string): number | undefined {
  const pid = readPid(join(runDir(dataDir), RUNNER_FILE));
  return pid !== undefined && pid !== process.pid && isOurNode(pid, root, "deploy/local/stack.ts") ? pid : undefined;
}

export async function writeRunnerPid(dataDir: string): Promise<void> {
  await mkdir(runDir(dataDir), { recursive: true });
  await writeFile(join(runDir(dataDir), RUNNER_FILE), String(process.pid));
}

export async function writeChildPid(dataDir: string, name: string, pid: number): Promise<void> {
  await mkdir(runDir(dataDir), { recursive: true });
  await writeFile(join(runDir(dataDir), `${name}.pid`), String(pid));
}

/** Removes the run's pid files once everything it started has stopped. */
export async function clearRunFiles(dataDir: string): Promise<void> {
  for (const name of await readdir(runDir(dataDir)).catch(() => [] as string[])) {
    if (name.endsWith(".pid")) await rm(join(runDir(dataDir), name), { force: true });
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone meanwhile
  }
}

/** Waits until none of `pids` runs; then SIGKILLs what is left and waits for that too. */
async function awaitExit(pids: number[], graceMs: number): Promise<number[]> {
  const deadline = Date.now() + graceMs;
  let left = pids.filter(running);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(100);
    left = left.filter(running);
  }
  for (const pid of left) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  const killDeadline = Date.now() + 5_000;
  while (left.some(running) && Date.now() < killDeadline) await sleep(50);
  return left;
}

/** Data directories of every PostgreSQL the stack runs below `dataDir`: metadata, templates, instances. */
function postgresDirs(dataDir: string): string[] {
  const dirs = [join(dataDir, "metadata")];
  const agents = join(dataDir, "agents");
  for (const agent of existsSync(agents) ? readdirSync(agents) : []) {
    for (const sub of ["instances", "templates"]) {
      const parent = join(agents, agent, sub);
      if (!existsSync(parent)) continue;
      for (const name of readdirSync(parent)) dirs.push(join(parent, name));
    }
  }
  return dirs.filter((d) => existsSync(join(d, "PG_VERSION")));
}

const serverExes = () => new Set([...findServerBinaries().values()].map((b) => realpathSync(b.postgres)));

export interface Leftovers {
  /** Children of a dead runner that still ran (service name → pid). */
  services: Array<{ name: string; pid: number }>;
  /** Postmasters still running in a data directory below the stack's. */
  postmasters: Array<{ dir: string; pid: number }>;
}

function leftoverServices(dataDir: string, root: string): Leftovers["services"] {
  const services: Leftovers["services"] = [];
  for (const name of existsSync(runDir(dataDir)) ? readdirSync(runDir(dataDir)) : []) {
    if (!name.endsWith(".pid") || name === RUNNER_FILE) continue;
    const pid = readPid(join(runDir(dataDir), name));
    if (pid !== undefined && isOurNode(pid, root, "--import")) services.push({ name: name.slice(0, -4), pid });
  }
  return services;
}

function leftoverPostmasters(dataDir: string, exes: ReadonlySet<string>): Leftovers["postmasters"] {
  return postgresDirs(dataDir)
    .map((dir) => ({ dir, pid: readPid(join(dir, "postmaster.pid")) }))
    .filter((p): p is { dir: string; pid: number } => p.pid !== undefined && isServerProcessIn(p.pid, realpathSync(p.dir), exes));
}

/**
 * Stops what a dead runner left behind, the way the runner itself would have:
 * SIGTERM to each child (an agent stops its instances on the way out), then a
 * fast shutdown (SIGINT) of any postmaster still running below the data
 * directory, each with a grace period before SIGKILL. Returns what it stopped.
 */
export async function stopLeftovers(dataDir: string, root: string, say: (line: string) => void): Promise<Leftovers> {
  const services = leftoverServices(dataDir, root);
  if (services.length > 0) {
    say(`stopping ${services.map((s) => `${s.name} (pid ${s.pid})`).join(", ")}`);
    for (const s of services) signal(s.pid, "SIGTERM");
    const killed = await awaitExit(
      services.map((s) => s.pid),
      30_000,
    );
    if (killed.length > 0) say(`killed ${killed.join(", ")}: they did not stop within 30 s`);
  }
  const postmasters = await stopServersAndPoolers(dataDir, say);
  return { services, postmasters };
}

/**
 * Every PostgreSQL server and PgBouncer still running below `dataDir` once no agent is left to stop them: an
 * agent killed (a lost host simulated, or one that outlived the runner's grace and got SIGKILL), one stopped
 * while it was still starting, or a dead run's. Postmasters get a fast shutdown (SIGINT), PgBouncers SIGTERM,
 * each with a grace period before SIGKILL. The runner calls it after its children stopped (Ctrl-C, `npm run
 * stop`, a test's teardown), the next start and `npm run stop` for a killed runner's. Returns the postmasters.
 */
export async function stopServersAndPoolers(dataDir: string, say: (line: string) => void): Promise<Leftovers["postmasters"]> {
  // A killed agent's fencing watchdog (it outlives its agent on purpose) goes first: no agent is left to need it.
  const agentsDir = join(dataDir, "agents");
  const watchdogs = (existsSync(agentsDir) ? readdirSync(agentsDir) : [])
    .map((a) => runningWatchdog(join(agentsDir, a)))
    .filter((pid): pid is number => pid !== undefined);
  if (watchdogs.length > 0) {
    say(`stopping ${watchdogs.length} agent watchdog(s): pid ${watchdogs.join(", ")}`);
    for (const pid of watchdogs) signal(pid, "SIGTERM");
    await awaitExit(watchdogs, 10_000);
  }
  // Whatever the agents did not stop (an agent killed as well), and the metadata PostgreSQL.
  const exes = serverExes();
  const postmasters = leftoverPostmasters(dataDir, exes);
  if (postmasters.length > 0) {
    say(`stopping ${postmasters.length} PostgreSQL server(s): pid ${postmasters.map((p) => p.pid).join(", ")}`);
    for (const p of postmasters) signal(p.pid, "SIGINT");
    await awaitExit(
      postmasters.map((p) => p.pid),
      30_000,
    );
  }
  // A killed postmaster's backends linger until they notice; the next postmaster needs them gone.
  // Only where no postmaster runs: those are orphans by definition.
  const running = new Set(leftoverPostmasters(dataDir, exes).map((p) => p.dir));
  const stragglers = postgresDirs(dataDir)
    .filter((d) => !running.has(d))
    .flatMap((d) => serverProcessesIn(realpathSync(d), exes));
  if (stragglers.length > 0) await awaitExit(stragglers, 5_000);
  // The databases' PgBouncers outlive a killed agent on purpose (its next start keeps them); a dead run's go.
  // Found in /proc by their ini below the agents' directories, not by pid file: one whose pid file was lost still goes.
  const bouncers = poolerProcessesBelow(join(dataDir, "agents"));
  if (bouncers.length > 0) {
    say(`stopping ${bouncers.length} connection pooler(s): pid ${bouncers.join(", ")}`);
    for (const pid of bouncers) signal(pid, "SIGTERM");
    await awaitExit(bouncers, 10_000);
  }
  return postmasters;
}
