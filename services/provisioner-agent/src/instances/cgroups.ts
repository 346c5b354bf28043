import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { readFile, rmdir, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Kernel limits per server: a cgroup per instance, with the tier's CPU quota,
 * memory limit and a pids limit. cgroup v2 where the host has its cpu, memory
 * and pids controllers on the unified hierarchy; the v1 `cpu`, `memory` and
 * `pids` hierarchies otherwise; none where neither can be written (not root,
 * a read-only /sys/fs/cgroup): then the agent says so and servers run
 * unlimited. A server's processes get there by `attach`ing its `pg_ctl`
 * before it execs (run-as.ts `beforeExec`): the postmaster and every process
 * it forks inherit the cgroup, so a memory hog meets the OOM killer inside
 * its own cgroup only.
 *
 * Nothing its user runs leaves it: a process that escaped from the server
 * (double-forked, `setsid`, its parent gone) is still there, and only root
 * moves processes between cgroups. A stop leaves such a process alone (the
 * cgroup stays, with it); a purge kills every one that runs as the server's
 * uid before that uid is free for the next database
 * (process-control.ts `killCgroupLeftovers`).
 *
 * Layout: `<hierarchy>/<agent's own cgroup>/dbaas-<12 hex of sha256(data dir,
 * agent id)>/<instance id>` on v1 (below the agent's cgroup, so a container's
 * limits bound its servers too), `<root>/dbaas-…/<instance id>` on v2 (the
 * no-internal-processes rule forbids controllers below a cgroup the agent
 * itself sits in).
 */

/** The limits of one server. */
export interface CgroupLimits {
  /** CPU time per period, µs: vCPUs × period. */
  cpuQuotaUs: number;
  cpuPeriodUs: number;
  /**
   * CPU weight under contention, in cgroup v2 units (100 = one default entity, range 1…10000): vCPUs × 100,
   * so a busy 2-vCPU server gets twice the share of a busy micro one (v1: cpu.shares, × 1024 / 100).
   */
  cpuWeight: number;
  memoryBytes: number;
  pids: number;
}

/** What the limits did, from the cgroup's own counters. */
export interface CgroupStats {
  memoryLimitBytes: number;
  /** Highest memory use seen (v1 memory.max_usage_in_bytes, v2 memory.peak or memory.current). */
  memoryPeakBytes: number;
  /** Times the memory limit was hit (v1 memory.failcnt, v2 memory.events `max`). */
  memoryLimitHits: number;
  /** Processes the OOM killer killed inside the cgroup. */
  oomKills: number;
  /** Periods in which the CPU quota throttled the cgroup (cpu.stat nr_throttled). */
  cpuThrottledPeriods: number;
  pidsMax: number;
}

export type CgroupMode = "v2" | "v1" | "none";

export interface InstanceCgroups {
  readonly mode: CgroupMode;
  /** Why there are no limits (mode "none"), for the start-up line, the agent status and /healthz. */
  readonly reason?: string;
  /** Creates the instance's cgroup or sets new limits on it (a resize). Nothing in mode "none". */
  apply(id: string, limits: CgroupLimits): Promise<void>;
  /** Moves process `pid` into the instance's cgroup; what it forks afterwards is there too. */
  attach(id: string, pid: number): Promise<void>;
  /**
   * Removes the instance's cgroup once its processes are gone (those still there are waited for, up to
   * REMOVE_BUSY_MS: an exit under way); absent is fine. Resolves with the pids that still live in it then, which keep
   * it (a process that escaped from the server, say): [] once it is gone. Nothing in mode "none".
   */
  remove(id: string): Promise<number[]>;
  /** The pids in the instance's cgroup now (`cgroup.procs`; v1: its three hierarchies' together); [] without one. */
  procs(id: string): Promise<number[]>;
  /** The instance's counters, or undefined without a cgroup. */
  stats(id: string): Promise<CgroupStats | undefined>;
}

export interface CgroupOptions {
  /** Where cgroup hierarchies are mounted. Default /sys/fs/cgroup. */
  root?: string;
  /** With `agentId`, names the agent's parent cgroup (several agents share a host). */
  dataDir: string;
  agentId: string;
  /** The agent's own /proc/self/cgroup (tests). */
  selfCgroup?: string;
}

const V1_CONTROLLERS = ["cpu", "memory", "pids"] as const;

/**
 * The agent's parent cgroup weighs as much as the host's CPUs (v2 units): every tenant's server sits below it, and
 * at the default weight all of them together would get no more CPU under contention than one busy process beside
 * them (the agent, a backup, anything else on the host).
 */
const parentWeight = () => Math.min(10_000, 100 * Math.max(1, os.availableParallelism()));
/** v2 weight (1…10000, default 100) as v1 cpu.shares (2…262144, default 1024). */
const v1Shares = (weight: number) => Math.max(2, Math.round((weight * 1024) / 100));
const WANTED = "+cpu +memory +pids";

/** Finds the hierarchy to use and makes the agent's parent cgroup; falls back to "none" with the reason. */
export function openInstanceCgroups(opts: CgroupOptions): InstanceCgroups {
  const root = opts.root ?? "/sys/fs/cgroup";
  const name = `dbaas-${createHash("sha256")
    .update(`${path.resolve(opts.dataDir)}\0${opts.agentId}`)
    .digest("hex")
    .slice(0, 12)}`;
  const none = (reason: string): InstanceCgroups => ({
    mode: "none",
    reason,
    apply: async () => {},
    attach: async () => {},
    remove: async () => [],
    procs: async () => [],
    stats: async () => undefined,
  });
  try {
    if (existsSync(path.join(root, "cgroup.controllers"))) return v2(root, name);
    if (V1_CONTROLLERS.every((c) => existsSync(path.join(root, c, "cgroup.procs")))) {
      return v1(root, name, opts.selfCgroup ?? readFileSync("/proc/self/cgroup", "utf8"));
    }
    return none(`no cgroup v2 hierarchy and no v1 cpu, memory and pids hierarchies under ${root}`);
  } catch (e) {
    return none((e as Error).message);
  }
}

const read = async (file: string) => (await readFile(file, "utf8")).trim();
const readNum = async (file: string) => Number(await read(file).catch(() => "0"));
/** `key value` lines (cpu.stat, memory.events, memory.oom_control) as numbers. */
async function keyed(file: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const line of (await read(file).catch(() => "")).split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined) out[k] = Number(v);
  }
  return out;
}
const ignoreMissing = (e: unknown) => {
  if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
};
/** The agent's parent goes with its last instance (a test stack's agent leaves nothing behind); apply makes it again. */
const removeIfEmpty = (dir: string) => rmdir(dir).catch(() => {});

/** How long a server's cgroup may stay busy after its processes were seen gone (their exit still under way). */
const REMOVE_BUSY_MS = 10_000;

/** The pids a cgroup's `cgroup.procs` lists ([] when the cgroup is gone). */
async function procsIn(dir: string): Promise<number[]> {
  let text: string;
  try {
    text = await read(path.join(dir, "cgroup.procs"));
  } catch (e) {
    ignoreMissing(e);
    return [];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid > 0);
}

/**
 * Removes a server's cgroup once the last of its processes has left it; resolves with [] (absent too). A stop waits
 * for the server's processes to be gone, but a process whose exit is still under way can keep the directory busy a
 * moment longer (EBUSY seen on a loaded host, which failed a stop); that is waited out, within REMOVE_BUSY_MS.
 * Processes `cgroup.procs` still lists then live on in it (escaped from the server, or put there by root): the
 * cgroup stays with them, and their pids are the answer. Busy with none listed (exits stuck past the wait) throws.
 */
async function removeWhenEmpty(dir: string): Promise<number[]> {
  const deadline = Date.now() + REMOVE_BUSY_MS;
  for (;;) {
    try {
      await rmdir(dir);
      return [];
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return [];
      if (code !== "EBUSY") throw e;
      if (Date.now() > deadline) {
        const left = await procsIn(dir);
        if (left.length) return left;
        throw e;
      }
    }
    await sleep(50);
  }
}

/**
 * cgroup v2 (Documentation/admin-guide/cgroup-v2.rst): the controllers are
 * enabled in the root's and the parent's `cgroup.subtree_control`; limits are
 * `cpu.max` ("$MAX $PERIOD"), `memory.max`, `memory.swap.max` (0: a hog does
 * not swap its neighbours out) and `pids.max`; membership `cgroup.procs`.
 */
function v2(root: string, name: string): InstanceCgroups {
  const available = readFileSync(path.join(root, "cgroup.controllers"), "utf8").trim().split(/\s+/);
  const missing = V1_CONTROLLERS.filter((c) => !available.includes(c));
  if (missing.length) {
    throw new Error(
      `the cgroup v2 hierarchy at ${root} lacks the ${missing.join(", ")} controller(s) (available: ${available.join(" ") || "none"}; bound to v1 hierarchies?)`,
    );
  }
  const parent = path.join(root, name);
  const ensureParent = () => {
    writeFileSync(path.join(root, "cgroup.subtree_control"), WANTED);
    mkdirSync(parent, { recursive: true });
    writeFileSync(path.join(parent, "cgroup.subtree_control"), WANTED);
    writeFileSync(path.join(parent, "cpu.weight"), String(parentWeight()));
  };
  // Proves the hierarchy writable now, not at the first start.
  ensureParent();
  const dir = (id: string) => path.join(parent, id);
  return {
    mode: "v2",
    async apply(id, l) {
      const d = dir(id);
      ensureParent();
      mkdirSync(d, { recursive: true });
      await writeFile(path.join(d, "cpu.max"), `${l.cpuQuotaUs} ${l.cpuPeriodUs}`);
      await writeFile(path.join(d, "cpu.weight"), String(l.cpuWeight));
      await writeFile(path.join(d, "memory.max"), String(l.memoryBytes));
      // Absent without swap accounting.
      await writeFile(path.join(d, "memory.swap.max"), "0").catch(ignoreMissing);
      await writeFile(path.join(d, "pids.max"), String(l.pids));
    },
    attach: (id, pid) => writeFile(path.join(dir(id), "cgroup.procs"), String(pid)),
    async remove(id) {
      const kept = await removeWhenEmpty(dir(id));
      if (kept.length === 0) await removeIfEmpty(parent);
      return kept;
    },
    procs: (id) => procsIn(dir(id)),
    async stats(id) {
      const d = dir(id);
      if (!existsSync(d)) return undefined;
      const events = await keyed(path.join(d, "memory.events"));
      const peak = existsSync(path.join(d, "memory.peak")) ? "memory.peak" : "memory.current";
      return {
        memoryLimitBytes: await readNum(path.join(d, "memory.max")),
        memoryPeakBytes: await readNum(path.join(d, peak)),
        memoryLimitHits: events.max ?? 0,
        oomKills: events.oom_kill ?? 0,
        cpuThrottledPeriods: (await keyed(path.join(d, "cpu.stat"))).nr_throttled ?? 0,
        pidsMax: await readNum(path.join(d, "pids.max")),
      };
    },
  };
}

/**
 * cgroup v1 (Documentation/admin-guide/cgroup-v1/): `cpu.cfs_period_us` and
 * `cpu.cfs_quota_us` (scheduler/sched-bwc.rst), `memory.limit_in_bytes`,
 * `pids.max`; membership `cgroup.procs` in each of the three hierarchies.
 */
function v1(root: string, name: string, selfCgroup: string): InstanceCgroups {
  // "4:memory:/some/path" (several controllers may share a line: "3:cpu,cpuacct:/").
  const own = new Map<string, string>();
  for (const line of selfCgroup.split("\n")) {
    const [, ctrls, p] = line.match(/^\d+:([^:]*):(.*)$/) ?? [];
    for (const c of ctrls?.split(",") ?? []) own.set(c, p ?? "/");
  }
  const parents = Object.fromEntries(
    V1_CONTROLLERS.map((c) => {
      const mine = path.join(root, c, own.get(c) ?? "/");
      return [c, path.join(existsSync(mine) ? mine : path.join(root, c), name)];
    }),
  ) as Record<(typeof V1_CONTROLLERS)[number], string>;
  // Proves the hierarchies writable now, not at the first start.
  const ensureParents = () => {
    for (const p of Object.values(parents)) mkdirSync(p, { recursive: true });
    writeFileSync(path.join(parents.cpu, "cpu.shares"), String(v1Shares(parentWeight())));
  };
  ensureParents();
  const dir = (c: (typeof V1_CONTROLLERS)[number], id: string) => path.join(parents[c], id);
  return {
    mode: "v1",
    async apply(id, l) {
      ensureParents();
      for (const c of V1_CONTROLLERS) mkdirSync(dir(c, id), { recursive: true });
      await writeFile(path.join(dir("cpu", id), "cpu.shares"), String(v1Shares(l.cpuWeight)));
      await writeFile(path.join(dir("cpu", id), "cpu.cfs_period_us"), String(l.cpuPeriodUs));
      await writeFile(path.join(dir("cpu", id), "cpu.cfs_quota_us"), String(l.cpuQuotaUs));
      await writeFile(path.join(dir("memory", id), "memory.limit_in_bytes"), String(l.memoryBytes));
      await writeFile(path.join(dir("pids", id), "pids.max"), String(l.pids));
    },
    async attach(id, pid) {
      for (const c of V1_CONTROLLERS) await writeFile(path.join(dir(c, id), "cgroup.procs"), String(pid));
    },
    async remove(id) {
      for (const c of V1_CONTROLLERS) {
        // A process is in all three (attach), so the first busy one tells.
        const kept = await removeWhenEmpty(dir(c, id));
        if (kept.length) return kept;
        await removeIfEmpty(parents[c]);
      }
      return [];
    },
    async procs(id) {
      // All three: root could have moved a process in one hierarchy only.
      const all = new Set<number>();
      for (const c of V1_CONTROLLERS) for (const pid of await procsIn(dir(c, id))) all.add(pid);
      return [...all].sort((a, b) => a - b);
    },
    async stats(id) {
      const m = dir("memory", id);
      if (!existsSync(m)) return undefined;
      return {
        memoryLimitBytes: await readNum(path.join(m, "memory.limit_in_bytes")),
        memoryPeakBytes: await readNum(path.join(m, "memory.max_usage_in_bytes")),
        memoryLimitHits: await readNum(path.join(m, "memory.failcnt")),
        oomKills: (await keyed(path.join(m, "memory.oom_control"))).oom_kill ?? 0,
        cpuThrottledPeriods: (await keyed(path.join(dir("cpu", id), "cpu.stat"))).nr_throttled ?? 0,
        pidsMax: await readNum(path.join(dir("pids", id), "pids.max")),
      };
    },
  };
}
