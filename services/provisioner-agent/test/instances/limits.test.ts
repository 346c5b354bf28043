import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tierResourceLimits } from "../../src/instances/tier-settings.ts";
import { connect, query, startHost, startInstance, type TestHost, type TestInstance, waitFor } from "../support/fixture.ts";

// Kernel limits per tier on real servers: a CPU hog and a memory hog in one
// micro database while a second one on the same host keeps answering
// `select 1`; the hog's cgroup counters show the limits at work, and the
// server the OOM killer hit comes back. Runs where the agent can make cgroups
// (root with v1 or v2 controllers); skipped otherwise.

const MICRO = tierResourceLimits("micro");

/** Median of `n` round trips of `select 1` on `c`, in ms. */
async function medianLatency(c: pg.Client, n = 40): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await c.query("SELECT 1");
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(n / 2)]!;
}

/** The cgroup paths of `pid`, one per hierarchy, from /proc. */
const cgroupsOf = async (pid: number) => readFile(`/proc/${pid}/cgroup`, "utf8");

/** The largest CPU weight for the cgroup of `pid` and the agent's parent above it (v1 cpu.shares, v2 cpu.weight). */
async function setCpuWeight(pid: number): Promise<void> {
  const lines = (await cgroupsOf(pid)).split("\n");
  const v1 = lines.find((l) => /^\d+:([^:]*,)?cpu(,[^:]*)?:/.test(l));
  const [dir, file, max] = v1
    ? [path.join("/sys/fs/cgroup/cpu", v1.split(":")[2]!), "cpu.shares", "262144"]
    : [path.join("/sys/fs/cgroup", lines.find((l) => l.startsWith("0::"))!.slice(3)), "cpu.weight", "10000"];
  for (const d of [path.dirname(dir), dir]) await writeFile(path.join(d, file), max);
}

let host: TestHost;
let hog: TestInstance;
let calm: TestInstance;
let neighbour: pg.Client;
let baseline: number;

beforeAll(async () => {
  host = await startHost("lim");
  if (host.m.resourceLimits.mode === "none") return;
  hog = await startInstance(host, "hog");
  calm = await startInstance(host, "calm");
  neighbour = await connect(calm.port, calm.password);
  baseline = await medianLatency(neighbour);
}, 120_000);

afterAll(async () => {
  await neighbour?.end().catch(() => {});
  await host?.close();
});

describe("kernel limits per tier", { timeout: 240_000 }, () => {
  it("puts each server, postmaster and backends, in a cgroup of its own with its tier's limits", async (t) => {
    if (host.m.resourceLimits.mode === "none") t.skip();
    const stats = await host.m.limitStats("hog");
    expect(stats).toMatchObject({ memoryLimitBytes: 1024 ** 3, pidsMax: MICRO.pids });
    const postmaster = await host.postmasterPid("hog");
    const c = await connect(hog.port, hog.password);
    try {
      const backend = Number((await c.query("SELECT pg_backend_pid() AS p")).rows[0].p);
      for (const pid of [postmaster, backend]) expect(await cgroupsOf(pid)).toMatch(/\/dbaas-[0-9a-f]{12}\/hog$/m);
    } finally {
      await c.end();
    }
    expect(await cgroupsOf(await host.postmasterPid("calm"))).toMatch(/\/calm$/m);
  });

  it("a CPU hog is throttled to its vCPU while its neighbour answers as usual", async (t) => {
    if (host.m.resourceLimits.mode === "none") t.skip();
    const before = (await host.m.limitStats("hog"))!.cpuThrottledPeriods;
    // The test machine is busy: at the default weight the hog's cgroup would get less than its one CPU anyway.
    // A large weight makes the quota what holds it back, as on a quiet host.
    await setCpuWeight(await host.postmasterPid("hog"));
    // Three busy backends want three CPUs; a micro server gets one.
    const hogs = Array.from({ length: 3 }, () =>
      query(hog.port, hog.password, "SET statement_timeout = '12s'; DO $$ BEGIN LOOP END LOOP; END $$").catch((e: Error) => e.message),
    );
    await new Promise((r) => setTimeout(r, 2000));
    const during = await medianLatency(neighbour);
    expect(await Promise.all(hogs)).toEqual(Array(3).fill("canceling statement due to statement timeout"));
    const throttled = (await host.m.limitStats("hog"))!.cpuThrottledPeriods - before;
    console.log(
      `select 1 on the neighbour: median ${baseline.toFixed(2)} ms alone, ${during.toFixed(2)} ms beside the CPU hog; hog throttled in ${throttled} periods`,
    );
    expect(throttled).toBeGreaterThan(0);
    // Generous: the machine is shared with other test runs.
    expect(during).toBeLessThan(Math.max(20 * baseline, 100));
  });

  it("a memory hog is killed inside its own cgroup; its neighbour lives on and the server comes back", async (t) => {
    if (host.m.resourceLimits.mode === "none") t.skip();
    const before = (await host.m.limitStats("hog"))!;
    // Two 500 MB strings and their 1 GB concatenation: twice a micro server's 1 GiB.
    const error = await query(hog.port, hog.password, "SELECT length(repeat('x', 500000000) || repeat('y', 500000000)) AS n").then(
      (rows) => `answered ${JSON.stringify(rows)}`,
      (e: Error) => e.message,
    );
    expect(error).not.toMatch(/^answered/);
    const after = (await host.m.limitStats("hog"))!;
    console.log(
      `memory hog: ${error}; failcnt ${before.memoryLimitHits} → ${after.memoryLimitHits}, peak ${after.memoryPeakBytes} bytes, OOM kills ${before.oomKills} → ${after.oomKills}`,
    );
    expect(after.memoryLimitHits).toBeGreaterThan(before.memoryLimitHits);
    expect(after.memoryPeakBytes).toBeLessThanOrEqual(1024 ** 3);
    expect(after.oomKills).toBeGreaterThan(before.oomKills);
    // The neighbour never noticed.
    const during = await medianLatency(neighbour);
    expect(during).toBeLessThan(Math.max(20 * baseline, 100));
    // The hog's server is back: its postmaster's crash restart, or (had the OOM killer taken the postmaster) the
    // start the reconciler makes of a crashed instance.
    const back = await waitFor(
      async () => {
        if ((await host.runtime.observe("hog")).state === "crashed") await host.runtime.start("hog", hog.settings);
        return query(hog.port, hog.password, "SELECT 1 AS one").catch(() => undefined);
      },
      60_000,
      "the hog's server answering again",
    );
    expect(back).toEqual([{ one: 1 }]);
  });
});
