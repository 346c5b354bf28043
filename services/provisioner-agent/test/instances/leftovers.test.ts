import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rename, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InstanceCgroups, openInstanceCgroups } from "../../src/instances/cgroups.ts";
import { tierResourceLimits } from "../../src/instances/tier-settings.ts";
import { startHost, startInstance, type TestHost } from "../support/fixture.ts";

// What a server's user leaves running (a process escaped from PostgreSQL: double-forked, setsid, its parent gone)
// keeps the server's uid and its cgroup. A stop leaves it be; a purge kills it before the uid is free for the next
// database — found by the cgroup, so a process of the same uid in another cgroup (another agent's server: agents
// whose uid ranges overlap) and a process of another uid in this cgroup both live on. Real servers, real processes
// of tenant uids (setpriv), real cgroups: root only, and only where the agent makes cgroups.

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const CONTROLLERS = ["cpu", "memory", "pids"];

/** A process that has not exited (a zombie has). */
function alive(pid: number): boolean {
  try {
    return !/^State:\s+[ZX]/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/** Polls until `cond` holds (60 s at most); fails with `what` otherwise. */
async function until(what: string, cond: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 60_000; !cond(); ) {
    if (Date.now() > deadline) throw new Error(`not within 60 s: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The pid of the live process whose command line is exactly `argv`, if any. */
function pidOfCommand(argv: readonly string[]): number | undefined {
  const want = `${argv.join("\0")}\0`;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8") === want && alive(Number(name))) return Number(name);
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}

/** The pid of `sleep <seconds>` once it runs (60 s at most). */
async function sleeperPid(what: string, seconds: string): Promise<number> {
  let pid: number | undefined;
  await until(what, () => {
    pid = pidOfCommand(["sleep", seconds]);
    return pid !== undefined;
  });
  return pid!;
}

/** The directories of `pid`'s cgroups the agent uses: v1 `cpu`, `memory`, `pids`, or v2's one. */
function cgroupDirsOf(pid: number): string[] {
  const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n");
  const v1 = CONTROLLERS.map((c) => {
    const line = lines.find((l) => l.split(":")[1]?.split(",").includes(c));
    return line && path.join("/sys/fs/cgroup", c, line.split(":")[2]!);
  });
  if (v1.every(Boolean)) return v1 as string[];
  return [path.join("/sys/fs/cgroup", lines.find((l) => l.startsWith("0::"))!.slice(3))];
}

function sessionOf(pid: number): { ppid: number; sid: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { ppid: Number(f[1]), sid: Number(f[3]) };
}

/** `sleep` (for `seconds`, a unique number: its command line finds it) as `uid`, detached from this process. */
function sleeperAs(uid: number, seconds: string): number {
  const child = spawn(SETPRIV!, [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "sleep", seconds], {
    stdio: "ignore",
    detached: true,
  });
  child.unref();
  return child.pid!;
}

const unique = () => `3600.${String(Math.floor(Math.random() * 1e9)).padStart(9, "0")}`;

describe.skipIf(process.getuid?.() !== 0 || !SETPRIV)(
  "what a server's user leaves in its cgroup (root, setpriv, cgroups)",
  { timeout: 240_000 },
  () => {
    let host: TestHost;
    /** Processes the tests started or made a server start (pid → its sleep's seconds): none outlives the file. */
    const started = new Map<number, string>();
    /** Cgroup directories a test made or the agent kept: removed at the end once empty. */
    const cgroupDirs = new Set<string>();
    let neighbourDir: string | undefined;
    let neighbour: InstanceCgroups | undefined;

    const dirOf = (id: string) => path.join(host.dataDir, "instances", id);

    /**
     * Makes instance `id`'s server start a process that escapes from it: a COPY TO PROGRAM (the agent's superuser: the
     * code execution a tenant would need) whose shell starts `setsid -f sleep <unique>` and exits, so the sleep has
     * a session of its own and no PostgreSQL parent. Resolves with its pid once it runs.
     */
    async function escapeFrom(id: string, on: TestHost = host): Promise<number> {
      const seconds = unique();
      await on.asAgent(id, `COPY (SELECT 1) TO PROGRAM 'setsid -f sleep ${seconds} </dev/null >/dev/null 2>&1'`);
      const pid = await sleeperPid(`the escaped sleep ${seconds} runs`, seconds);
      started.set(pid, seconds);
      return pid;
    }

    beforeAll(async () => {
      host = await startHost("lft");
    }, 120_000);

    afterAll(async () => {
      // Only while the pid is still that sleep: a pid freed by a kill may be another's by now (a shared machine).
      const ours = () => [...started].filter(([pid, seconds]) => pidOfCommand(["sleep", seconds]) === pid).map(([pid]) => pid);
      for (const pid of ours()) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone
        }
      }
      await until("the tests' processes are gone", () => ours().length === 0).catch(() => {});
      await host?.close();
      if (neighbour) await neighbour.remove("neighbour").catch(() => {});
      // Kept cgroups (a test's foreign process held one), then their parents (the agent's `dbaas-…`) if empty.
      for (const d of [...cgroupDirs, ...[...cgroupDirs].map((d) => path.dirname(d))]) {
        try {
          rmdirSync(d);
        } catch {
          // gone, or not empty: another agent's
        }
      }
      if (neighbourDir) await rm(neighbourDir, { recursive: true, force: true });
    }, 120_000);

    it("a process escaped from the server survives a stop (the cgroup stays, with it) and is gone after the purge", async (t) => {
      if (host.m.resourceLimits.mode === "none") t.skip();
      const a = await startInstance(host, "lft-a");
      const postmaster = await host.postmasterPid(a.id);
      const uid = (await stat(dirOf(a.id))).uid;
      const dirs = cgroupDirsOf(postmaster);
      for (const d of dirs) cgroupDirs.add(d);
      const escaped = await escapeFrom(a.id);
      // Escaped: its own session, not the postmaster's child, still the server's uid and in the server's cgroup.
      expect(sessionOf(escaped).sid).toBe(escaped);
      expect(sessionOf(escaped).ppid).not.toBe(postmaster);
      expect((await stat(`/proc/${escaped}`)).uid).toBe(uid);
      expect(cgroupDirsOf(escaped)).toEqual(dirs);

      await host.runtime.stop(a.id);
      expect(alive(postmaster)).toBe(false);
      expect(alive(escaped)).toBe(true);
      // The cgroup stays with what lives in it.
      for (const d of dirs) expect(readFileSync(path.join(d, "cgroup.procs"), "utf8").split("\n")).toContain(String(escaped));

      await host.m.purge(a.id);
      expect(existsSync(dirOf(a.id))).toBe(false);
      expect(alive(escaped)).toBe(false);
      for (const d of dirs) expect(existsSync(d)).toBe(false);
    });

    it("a purge interrupted once the directory was renamed: the agent's cleanup of the leftover kills it too", async (t) => {
      if (host.m.resourceLimits.mode === "none") t.skip();
      const d = await startInstance(host, "lft-d");
      const dirs = cgroupDirsOf(await host.postmasterPid(d.id));
      for (const dir of dirs) cgroupDirs.add(dir);
      const escaped = await escapeFrom(d.id);
      await host.runtime.stop(d.id);
      // What a crash right after the purge's rename leaves: the directory under a .purging- name, the uid still taken.
      const doomed = `${dirOf(d.id)}.purging-0123abcd`;
      await rename(dirOf(d.id), doomed);
      expect(alive(escaped)).toBe(true);

      expect(await host.m.cleanupLeftovers()).toContain(path.basename(doomed));
      expect(existsSync(doomed)).toBe(false);
      expect(alive(escaped)).toBe(false);
      for (const dir of dirs) expect(existsSync(dir)).toBe(false);
    });

    it("a process of the same uid in another cgroup (another agent's server of that uid) survives the purge", async (t) => {
      if (host.m.resourceLimits.mode === "none") t.skip();
      const b = await startInstance(host, "lft-b");
      const uid = (await stat(dirOf(b.id))).uid;
      const dirs = cgroupDirsOf(await host.postmasterPid(b.id));
      for (const d of dirs) cgroupDirs.add(d);
      const escaped = await escapeFrom(b.id);
      // Another agent (another data directory) with a server of the same uid, in that agent's cgroup.
      neighbourDir = await mkdtemp(path.join(os.tmpdir(), "dbaas-lft-neighbour-"));
      neighbour = openInstanceCgroups({ dataDir: neighbourDir, agentId: "test-lft-neighbour" });
      await neighbour.apply("neighbour", tierResourceLimits("micro"));
      const seconds = unique();
      sleeperAs(uid, seconds);
      const other = await sleeperPid("the neighbour's process runs", seconds);
      started.set(other, seconds);
      await neighbour.attach("neighbour", other);
      expect(cgroupDirsOf(other)).not.toEqual(dirs);
      expect((await stat(`/proc/${other}`)).uid).toBe(uid);

      await host.m.purge(b.id);
      expect(existsSync(dirOf(b.id))).toBe(false);
      expect(alive(escaped)).toBe(false);
      expect(alive(other)).toBe(true);
      expect(await neighbour.procs("neighbour")).toEqual([other]);
    });

    it("a process of another uid in the server's cgroup survives the purge, and keeps the cgroup", async (t) => {
      if (host.m.resourceLimits.mode === "none") t.skip();
      const c = await startInstance(host, "lft-c");
      const uid = (await stat(dirOf(c.id))).uid;
      const dirs = cgroupDirsOf(await host.postmasterPid(c.id));
      for (const d of dirs) cgroupDirs.add(d);
      const escaped = await escapeFrom(c.id);
      // Root puts a process of another uid into the server's cgroup (every hierarchy).
      const seconds = unique();
      sleeperAs(uid + 1, seconds);
      const foreign = await sleeperPid("the foreign process runs", seconds);
      started.set(foreign, seconds);
      for (const d of dirs) writeFileSync(path.join(d, "cgroup.procs"), String(foreign));
      expect(cgroupDirsOf(foreign)).toEqual(dirs);

      await host.m.purge(c.id);
      expect(existsSync(dirOf(c.id))).toBe(false);
      expect(alive(escaped)).toBe(false);
      expect(alive(foreign)).toBe(true);
      expect(cgroupDirsOf(foreign)).toEqual(dirs);
    });

    it("without cgroups a purge kills nothing of the server's uid, and says so in the log", async () => {
      // An agent whose cgroup root holds no hierarchy: mode "none", servers run unlimited.
      const lines: string[] = [];
      const empty = await mkdtemp(path.join(os.tmpdir(), "dbaas-lft-nocg-"));
      const bare = await startHost("lft-nocg", { cgroupRoot: empty, log: (m) => lines.push(m), removeOnClose: [empty] });
      try {
        expect(bare.m.resourceLimits.mode).toBe("none");
        const e = await startInstance(bare, "lft-e");
        const escaped = await escapeFrom(e.id, bare);
        await bare.m.purge(e.id);
        expect(existsSync(path.join(bare.dataDir, "instances", e.id))).toBe(false);
        expect(lines.join("\n")).toMatch(
          /instance lft-e: no cgroups \(.*\): processes its server's user \(uid \d+\) may have left running are not looked for/,
        );
        // Nothing told it from another agent's process of that uid: it lives on (afterAll ends it).
        expect(alive(escaped)).toBe(true);
      } finally {
        await bare.close();
      }
    });
  },
);
