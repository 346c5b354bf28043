import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openInstanceCgroups } from "../../src/instances/cgroups.ts";
import { tierResourceLimits } from "../../src/instances/tier-settings.ts";

// Which hierarchy the agent picks, and what it says when it cannot limit
// anything. The limits themselves are proven on real servers in limits.test.ts.

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) {
    try {
      execFileSync("umount", [d], { stdio: "ignore" });
    } catch {
      // not mounted
    }
    rmSync(d, { recursive: true, force: true });
  }
});
const tempDir = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), "dbaas-cg-"));
  dirs.push(d);
  return d;
};

describe("openInstanceCgroups", () => {
  it("says why there are no limits where no hierarchy is mounted", () => {
    const cg = openInstanceCgroups({ root: tempDir(), dataDir: "/nowhere", agentId: "a" });
    expect(cg.mode).toBe("none");
    expect(cg.reason).toMatch(/no cgroup v2 hierarchy and no v1 cpu, memory and pids hierarchies/);
  });

  it("picks the v1 hierarchies where /sys/fs/cgroup has them", async (t) => {
    const cg = openInstanceCgroups({ dataDir: tempDir(), agentId: "v1-pick" });
    if (cg.mode !== "v1") t.skip();
    expect(cg.reason).toBeUndefined();
    // Its parent goes with its last instance; it has none.
    await cg.remove("none-here");
  });

  it("refuses a v2 hierarchy whose cpu, memory and pids controllers are bound elsewhere, naming them", (t) => {
    // Where v1 holds those controllers (these machines), a freshly mounted v2 hierarchy offers none of them.
    const root = tempDir();
    try {
      execFileSync("mount", ["-t", "cgroup2", "none", root], { stdio: "ignore" });
    } catch {
      t.skip();
    }
    const cg = openInstanceCgroups({ root, dataDir: tempDir(), agentId: "v2-check" });
    const controllers = execFileSync("cat", [path.join(root, "cgroup.controllers")], { encoding: "utf8" });
    if (/\bcpu\b/.test(controllers) && /\bmemory\b/.test(controllers) && /\bpids\b/.test(controllers)) {
      // A host with them on v2: the v2 path is taken.
      expect(cg.mode).toBe("v2");
      return;
    }
    expect(cg.mode).toBe("none");
    expect(cg.reason).toMatch(/cgroup v2 hierarchy at .* lacks the .*controller/);
  });

  it("removing a server's cgroup waits for a process still in it to leave (EBUSY), then removes it", async (t) => {
    const cg = openInstanceCgroups({ dataDir: tempDir(), agentId: "v1-busy" });
    if (cg.mode !== "v1") t.skip();
    await cg.apply("busy", tierResourceLimits("micro"));
    // A process that leaves 0.8 s after the remove starts, as a server process whose exit is still under way.
    const child = spawn("sleep", ["0.8"], { stdio: "ignore" });
    const exited = new Promise((r) => child.once("exit", r));
    await cg.attach("busy", child.pid!);
    const self = readFileSync("/proc/self/cgroup", "utf8").match(/^\d+:([^:]*,)?cpu(,[^:]*)?:(.*)$/m)?.[3] ?? "/";
    const busyDir = () =>
      execFileSync("sh", ["-c", `ls -d /sys/fs/cgroup/cpu${self === "/" ? "" : self}/dbaas-*/busy 2>/dev/null || true`], {
        encoding: "utf8",
      }).trim();
    expect(busyDir()).not.toBe("");
    try {
      await cg.remove("busy");
      expect(busyDir()).toBe("");
    } finally {
      await exited;
      await cg.remove("busy");
    }
  });

  it("weighs each server's CPU by its tier's vCPUs, and the agent's parent by the host's CPUs (v1 cpu.shares)", async (t) => {
    const cg = openInstanceCgroups({ dataDir: tempDir(), agentId: "v1-weight" });
    if (cg.mode !== "v1") t.skip();
    const self = readFileSync("/proc/self/cgroup", "utf8").match(/^\d+:([^:]*,)?cpu(,[^:]*)?:(.*)$/m)?.[3] ?? "/";
    const parent = execFileSync("sh", ["-c", `ls -d /sys/fs/cgroup/cpu${self === "/" ? "" : self}/dbaas-*`], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
    try {
      await cg.apply("w-micro", tierResourceLimits("micro"));
      await cg.apply("w-medium", tierResourceLimits("medium"));
      // Several agents' parents may sit side by side: this one holds the instances just made.
      const dir = parent.find((p) => existsSync(path.join(p, "w-medium")));
      expect(dir).toBeDefined();
      const read = (f: string) => readFileSync(path.join(dir!, f), "utf8").trim();
      expect(read("cpu.shares")).toBe(String(1024 * os.availableParallelism()));
      expect(read("w-micro/cpu.shares")).toBe("1024");
      expect(read("w-medium/cpu.shares")).toBe("4096");
      expect(read("w-medium/cpu.cfs_quota_us")).toBe("400000");
    } finally {
      await cg.remove("w-micro");
      await cg.remove("w-medium");
    }
  });
});
