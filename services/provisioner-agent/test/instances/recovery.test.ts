import { existsSync } from "node:fs";
import { chmod, chown, mkdir, readFile, readdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findServerBinaries } from "../../src/instances/binaries.ts";
import type { InstanceManager } from "../../src/instances/instance-manager.ts";
import { resolveRunAs, runCommand } from "../../src/instances/run-as.ts";
import { freePort, query, randomPassword, scramVerifier, startHost, type TestHost, waitFor } from "../support/fixture.ts";

const HOST = "db-recovery.example.test";

describe("crash safety and recovery", { timeout: 60_000 }, () => {
  let host: TestHost;
  let dataDir: string;
  let m: InstanceManager;
  const password = randomPassword();

  beforeAll(async () => {
    host = await startHost("recovery");
    ({ dataDir, m } = host);
  }, 60_000);

  afterAll(() => host?.close(), 60_000);

  it("a build interrupted by an agent crash (temp dir with a live server) is killed, removed and rebuilt; concurrent callers share one build", async () => {
    // Recreate what a crash mid-build leaves: a temp template with its build server still running.
    const bins = findServerBinaries().get("17")!;
    const runAs = resolveRunAs();
    const tmp = path.join(dataDir, "templates", "17.tmp-0badf00d");
    await mkdir(path.dirname(tmp), { recursive: true });
    await chmod(dataDir, 0o711);
    await chmod(path.dirname(tmp), 0o711);
    await mkdir(tmp, { mode: 0o700 });
    await mkdir(m.socketDir, { recursive: true, mode: 0o700 });
    if (runAs.switchUser) {
      await chown(tmp, runAs.uid, runAs.gid);
      await chown(m.socketDir, runAs.uid, runAs.gid);
    }
    await runCommand(bins.initdb, ["-D", tmp, "-U", "dbaas_agent", "-A", "trust", "--no-sync", "--locale=C"], { runAs });
    await runCommand(
      bins.pgCtl,
      ["-D", tmp, "-w", "-l", "/dev/null", "-o", `-c listen_addresses= -c unix_socket_directories=${m.socketDir} -c port=1017`, "start"],
      { runAs },
    );
    const orphanPid = Number((await readFile(path.join(tmp, "postmaster.pid"), "utf8")).split("\n")[0]);

    const [a, b] = await Promise.all([m.ensureTemplate("17"), m.ensureTemplate("17")]);
    const orphanState = await readFile(`/proc/${orphanPid}/stat`, "utf8").then(
      (st) => st.slice(st.lastIndexOf(")") + 2, st.lastIndexOf(")") + 3),
      () => "gone",
    );
    expect(["gone", "Z"]).toContain(orphanState);
    expect(a).toBe(b);
    expect(await readdir(path.join(dataDir, "templates"))).toEqual(["17", "17.build.log"]);
    expect(await m.ensureTemplate("17")).toBe(a);
  });

  it("removes leftover .tmp-/.purging- dirs and ignores them in listInstances", async () => {
    await m.provision("keep", { major: "17" });
    const inst = path.join(dataDir, "instances");
    await mkdir(path.join(inst, "half.tmp-deadbeef"));
    await writeFile(path.join(inst, "half.tmp-deadbeef", "PG_VERSION"), "17\n");
    await mkdir(path.join(inst, "gone.purging-0123abcd"));
    await mkdir(path.join(dataDir, "templates", "16.tmp-cafebabe"));
    expect(await m.listInstances()).toEqual(["keep"]);
    const removed = await m.cleanupLeftovers();
    expect(removed.sort()).toEqual(["16.tmp-cafebabe", "gone.purging-0123abcd", "half.tmp-deadbeef"]);
    expect((await readdir(inst)).sort()).toEqual(["keep"]);
    expect(await m.cleanupLeftovers()).toEqual([]);
  });

  it("provision is a no-op when the instance exists, and a leftover temp copy does not block it", async () => {
    await mkdir(path.join(dataDir, "instances", "fresh.tmp-11111111"));
    await m.provision("fresh", { major: "17" });
    await m.provision("fresh", { major: "17" });
    expect((await readdir(path.join(dataDir, "instances"))).filter((n) => n.startsWith("fresh")).sort()).toEqual(["fresh"]);
    await expect(m.provision("fresh", { major: "16" })).rejects.toThrow(/already exists with PostgreSQL 17/);
  });

  it("kill -9 of the postmaster: observe() = crashed, start() recovers with data intact", async () => {
    const id = "crashy";
    const port = await freePort();
    const opts = { port, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) };
    await m.provision(id, { major: "17" });
    await m.start(id, opts);
    await query(port, password, "CREATE TABLE t (v int); INSERT INTO t VALUES (7)");
    const running = await m.observe(id);
    expect(running.state).toBe("running");
    process.kill(running.pid!, "SIGKILL");
    await waitFor(async () => (await m.observe(id)).state === "crashed", 5000);
    const crashed = await m.observe(id);
    expect(crashed).toMatchObject({ state: "crashed", pid: running.pid });
    expect(existsSync(path.join(dataDir, "instances", id, "postmaster.pid"))).toBe(true);

    await m.start(id, opts);
    const recovered = await m.observe(id);
    expect(recovered.state).toBe("running");
    expect(recovered.pid).not.toBe(running.pid);
    expect(await query(port, password, "SELECT v FROM t")).toEqual([{ v: 7 }]);
    // Its crash recovery began with one syncfs() of the filesystem, not an fsync of every file (seconds on a busy host).
    expect(await query(port, password, "SELECT current_setting('recovery_init_sync_method') AS m")).toEqual([{ m: "syncfs" }]);
  });

  it("once the dead postmaster's pid is gone, PostgreSQL itself discards the stale postmaster.pid", async () => {
    const id = "crashy";
    const obs = await m.observe(id);
    process.kill(obs.pid!, "SIGKILL");
    // Wait until even the zombie is reaped, so kill(pid, 0) fails as PostgreSQL expects.
    await waitFor(async () => {
      try {
        process.kill(obs.pid!, 0);
        return false;
      } catch {
        return true;
      }
    }, 20_000);
    expect(await m.observe(id)).toMatchObject({ state: "crashed", pid: obs.pid });
    await m.start(id, { port: obs.port!, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) });
    expect((await m.observe(id)).state).toBe("running");
    expect(await query(obs.port!, password, "SELECT v FROM t")).toEqual([{ v: 7 }]);
  });

  it("stop() on a crashed instance cleans up so observe() = stopped", async () => {
    const id = "crashy";
    const obs = await m.observe(id);
    process.kill(obs.pid!, "SIGKILL");
    await waitFor(async () => (await m.observe(id)).state === "crashed", 5000);
    await m.stop(id);
    expect(await m.observe(id)).toEqual({ state: "stopped" });
    expect((await m.resourceUsage(id)).pids).toEqual([]);
  });

  it("a purge interrupted after the rename is finished by the next purge/cleanup", async () => {
    await m.provision("doomed", { major: "17" });
    const inst = path.join(dataDir, "instances");
    // Simulate a crash right after rename-to-.purging.
    const { rename } = await import("node:fs/promises");
    await rename(path.join(inst, "doomed"), path.join(inst, "doomed.purging-abcdef01"));
    expect(await m.observe("doomed")).toEqual({ state: "absent" });
    await m.purge("doomed");
    expect((await readdir(inst)).filter((n) => n.startsWith("doomed"))).toEqual([]);
  });

  it("rejects bad ids and options before touching disk", async () => {
    await expect(m.provision("../evil", { major: "17" })).rejects.toThrow(/invalid instance id/);
    await expect(m.provision("a.tmp-1", { major: "17" })).rejects.toThrow(/invalid instance id/);
    await expect(m.provision("nover", { major: "9" })).rejects.toThrow(/not installed/);
    await expect(m.start("keep", { port: 80, tier: "micro", hostname: HOST, scramVerifier: scramVerifier("x") })).rejects.toThrow(/port/);
    await expect(m.start("keep", { port: 5432, tier: "huge", hostname: HOST, scramVerifier: scramVerifier("x") })).rejects.toThrow(/tier/);
    await expect(m.start("missing", { port: 5432, tier: "micro", hostname: HOST, scramVerifier: scramVerifier("x") })).rejects.toThrow(
      /not provisioned/,
    );
  });
});
