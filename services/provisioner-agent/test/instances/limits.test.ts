import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tierResourceLimits } from "../../src/instances/tier-settings.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import {
  connect,
  freePort,
  instanceSpec,
  query,
  randomPassword,
  reconcilerFor,
  running,
  scramVerifier,
  startHost,
  type TestHost,
  type TestInstance,
  waitFor,
} from "../support/fixture.ts";

// Kernel limits per tier on real servers: a CPU hog and a memory hog in one
// micro database while a second one on the same host keeps answering
// `select 1`; the hog's cgroup counters show the limits at work, and the
// server the OOM killer hit comes back. Runs where the agent can make cgroups
// (root with v1 or v2 controllers); skipped otherwise. The servers are the
// agent's reconciler's to run: it creates them, and brings the hog back after
// the kill as after any crash; the test starts nothing itself.

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

/** Instance `id` as the databases service would desire it (micro, a free port, a fresh password); nothing made yet. */
async function desired(id: string): Promise<TestInstance> {
  const port = await freePort();
  const password = randomPassword();
  const hostname = `${id}.example.test`;
  const settings = { port, tier: "micro", hostname, scramVerifier: scramVerifier(password) };
  const spec = instanceSpec({ databaseId: id, port, tier: "micro", host: hostname, scramVerifier: settings.scramVerifier });
  return { id, port, password, settings, spec };
}

let host: TestHost;
let reconciler: Reconciler;
let hog: TestInstance;
let calm: TestInstance;
let neighbour: pg.Client;
let baseline: number;

beforeAll(async () => {
  host = await startHost("lim");
  if (host.m.resourceLimits.mode === "none") return;
  hog = await desired("hog");
  calm = await desired("calm");
  reconciler = reconcilerFor(host, { concurrency: 2 });
  reconciler.setDesired([hog.spec, calm.spec]);
  // Generous: the first create builds the template (initdb), 30 s and more on a loaded machine.
  await Promise.all([running(reconciler, "hog", 1n, 180_000), running(reconciler, "calm", 1n, 180_000)]);
  neighbour = await connect(calm.port, calm.password);
  baseline = await medianLatency(neighbour);
}, 240_000);

afterAll(async () => {
  await neighbour?.end().catch(() => {});
  await reconciler?.drain();
  await host?.close();
}, 60_000);

describe("kernel limits per tier", { timeout: 360_000 }, () => {
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
    const postmasterBefore = await host.postmasterPid("hog");
    const c = await connect(hog.port, hog.password);
    // The postmaster is made the OOM killer's choice (oom_score_adj 1000 puts the whole limit on top of its
    // badness; the backend, forked before, keeps 0): then only the agent can bring the server back, so this fails
    // if it does not. Left alone, the killer takes the backend and the postmaster restarts the server itself.
    await writeFile(`/proc/${postmasterBefore}/oom_score_adj`, "1000");
    // Two 500 MB strings and their 1 GB concatenation: twice a micro server's 1 GiB.
    const error = await c.query("SELECT length(repeat('x', 500000000) || repeat('y', 500000000)) AS n").then(
      (r) => `answered ${JSON.stringify(r.rows)}`,
      (e: Error) => e.message,
    );
    await c.end().catch(() => {});
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
    // The hog's server is back, started again by the agent's reconciler as after any crash: its check between two
    // heartbeats (checkServers, as the control loop calls it) finds the postmaster gone. The test starts nothing.
    let noticed = 0;
    const back = await waitFor(
      async () => {
        noticed += reconciler.checkServers();
        return query(hog.port, hog.password, "SELECT 1 AS one").catch(() => undefined);
      },
      180_000,
      "the hog's server answering again",
    );
    expect(back).toEqual([{ one: 1 }]);
    const postmasterAfter = await host.postmasterPid("hog");
    console.log(
      `the OOM killer took the postmaster (${postmasterBefore}); the reconciler noticed (${noticed}) and started ${postmasterAfter}`,
    );
    expect(postmasterAfter).not.toBe(postmasterBefore);
    expect(noticed).toBeGreaterThan(0);
    // The reconciler sees it running again, as desired.
    await running(reconciler, "hog", 1n, 120_000);
  });
});
