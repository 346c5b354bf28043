import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createLogger } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { processRunning } from "../../src/instances/procfs.ts";
import {
  createWatchdogControl,
  DATA_DIR_ARG,
  monotonicMs,
  runningWatchdog,
  WATCHDOG_FILE,
  watchdogLog,
} from "../../src/instances/watchdog.ts";
import { createLeaseKeeper } from "../../src/leases.ts";
import { query, startHost, startInstance, type TestHost, type TestInstance, waitFor } from "../support/fixture.ts";

// The fencing watchdog (src/instances/watchdog.ts) on a real PostgreSQL 17 primary: an agent process
// (support/lease-agent-child.ts: the local runtime with its watchdog, fenceOnStart and the lease keeper, granted the
// primary's lease at every renewal) is killed with SIGKILL while the primary runs. While it renews, the watchdog
// leaves the primary alone; an agent started again keeps the watchdog it finds (never a second one); once no agent
// renews, the watchdog stops the postmaster before the lease the agent last published ends.

const CHILD = fileURLToPath(new URL("../support/lease-agent-child.ts", import.meta.url));
/** Long enough for an agent process to start again under load (tsx) before the lease it left ends. */
const LEASE_MS = 15_000;
const RENEW_MS = 1000;

/** Every watchdog process of `dataDir`, by command line. */
function watchdogsOf(dataDir: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      const i = args.indexOf(DATA_DIR_ARG);
      if (i >= 0 && args[i + 1] === dataDir) pids.push(Number(name));
    } catch {
      // gone
    }
  }
  return pids;
}

interface Agent {
  child: ChildProcess;
  renewals: () => number;
  exited: Promise<void>;
}

describe("the fencing watchdog: a primary whose agent is dead is stopped before its lease ends", { timeout: 300_000 }, () => {
  let host: TestHost;
  let inst: TestInstance;
  const agents: Agent[] = [];

  function startAgent(): Agent {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, host.dataDir, inst.id, String(LEASE_MS), String(RENEW_MS)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let n = 0;
    let output = "";
    createInterface({ input: child.stdout! }).on("line", (l) => {
      if (l.startsWith("@@ ")) n = (JSON.parse(l.slice(3)) as { renewed: number }).renewed;
      else output += `${l}\n`;
    });
    child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise<void>((resolve) =>
      child.once("exit", (code, signal) => {
        if (signal !== "SIGKILL") console.log(`lease agent exited (${code ?? signal}):\n${output}`);
        resolve();
      }),
    );
    const agent = { child, renewals: () => n, exited };
    agents.push(agent);
    return agent;
  }

  const kill = async (a: Agent) => {
    a.child.kill("SIGKILL");
    await a.exited;
  };

  /** A write as the customer through the published port, in a connection of its own: undefined when it worked, else why not. */
  const writeFails = async (): Promise<string | undefined> => {
    try {
      await query(inst.port, inst.password, "INSERT INTO w DEFAULT VALUES");
      return undefined;
    } catch (e) {
      return (e as Error).message;
    }
  };

  beforeAll(async () => {
    host = await startHost("watchdog");
    inst = await startInstance(host, "wdprimary");
    await query(inst.port, inst.password, "CREATE TABLE w (id serial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())");
  }, 240_000);

  afterAll(async () => {
    for (const a of agents) if (a.child.exitCode === null && a.child.signalCode === null) await kill(a);
    for (const pid of host ? watchdogsOf(host.dataDir) : []) process.kill(pid, "SIGTERM");
    await host?.close();
  });

  it("what the lease keeper publishes is never more lenient than the server: armed while it may take writes, left out once fenced, back before it is unfenced", async () => {
    const published = async () =>
      (JSON.parse(await readFile(path.join(host.dataDir, WATCHDOG_FILE), "utf8")) as { leaseEndsAt: Record<string, number> }).leaseEndsAt;
    const runtime = createLocalProcessRuntime(
      host.m,
      createWatchdogControl({
        dataDir: host.dataDir,
        marginMs: 1000,
        entry: fileURLToPath(new URL("../../src/instances/watchdog-main.ts", import.meta.url)),
        nodeArgs: ["--import", "tsx"],
        log: () => {},
      }),
    );
    let t = 0;
    let grant = [inst.id];
    const keeper = createLeaseKeeper({
      runtime,
      renew: async () => ({ databaseIds: grant, leaseMillis: 20_000 }),
      log: createLogger("watchdog-test"),
      dataDir: host.dataDir,
      renewIntervalMs: 2000,
      fenceMarginMs: 3000,
      fencedAtStart: [],
      onFencingChanged: () => {},
      now: () => t,
    });
    const spec = { ...inst.spec, leaseRequired: true };
    keeper.setDesired([spec], []);
    await keeper.tick();
    // In its first grant's grace: armed until the grace's end and the fence margin (5 s), in real time from now.
    const grace = (await published())[inst.id]!;
    expect(grace - monotonicMs()).toBeGreaterThan(3000);
    expect(grace - monotonicMs()).toBeLessThanOrEqual(5000);
    await keeper.renewOnce();
    const first = (await published())[inst.id]!;
    expect(first - monotonicMs()).toBeGreaterThan(15_000);
    // The lease running out unrenewed: fenced, and only then left out.
    t = 17_001;
    await keeper.tick();
    expect(runtime.isFenced(inst.id)).toBe(true);
    expect(await published()).toEqual({});
    // Renewed: published again (with the new lease) before the server lets clients in.
    t = 18_000;
    await keeper.renewOnce();
    expect(await published()).toEqual({});
    await keeper.tick();
    expect(runtime.isFenced(inst.id)).toBe(false);
    expect((await published())[inst.id]! - monotonicMs()).toBeGreaterThan(15_000);
    // A renewal that omits it (the lease moved): it keeps its last lease's end until its fence is done.
    grant = [];
    t = 19_000;
    const before = (await published())[inst.id]!;
    await keeper.renewOnce();
    expect((await published())[inst.id]).toBe(before);
    await keeper.tick();
    expect(runtime.isFenced(inst.id)).toBe(true);
    expect(await published()).toEqual({});
    // No longer highly available: unfenced, and nothing to arm.
    keeper.setDesired([inst.spec], []);
    await keeper.tick();
    expect(runtime.isFenced(inst.id)).toBe(false);
    expect(await published()).toEqual({});
    expect(await writeFails()).toBeUndefined();
  });

  it("leaves a renewed primary alone, is kept by a restarted agent, and stops the postmaster before the lease ends once no agent renews", async () => {
    const first = startAgent();
    await waitFor(() => first.renewals() >= 2, 60_000, "the agent renewing");
    const watchdog = await waitFor(() => runningWatchdog(host.dataDir), 60_000, "the watchdog running");
    const leaseFile = path.join(host.dataDir, WATCHDOG_FILE);
    const published = async () =>
      JSON.parse(await readFile(leaseFile, "utf8")) as { marginMs: number; leaseEndsAt: Record<string, number> };
    expect(Object.keys((await published()).leaseEndsAt)).toEqual([inst.id]);
    const postmaster = await host.postmasterPid(inst.id);

    // Renewals for longer than the first lease published: the watchdog does nothing.
    const from = first.renewals();
    await waitFor(() => first.renewals() >= from + LEASE_MS / RENEW_MS + 2, 90_000, "a lease's worth of renewals");
    expect(await writeFails()).toBeUndefined();
    expect(await host.postmasterPid(inst.id)).toBe(postmaster);

    // The agent killed and started again at once: it fences the primary at start, renews, lets clients back in, and
    // keeps the watchdog it found (no second one).
    await kill(first);
    const second = startAgent();
    await waitFor(() => second.renewals() >= 2, 60_000, "the restarted agent renewing");
    await waitFor(async () => (await writeFails()) === undefined, 60_000, "writes after the agent's restart");
    expect(watchdogsOf(host.dataDir)).toEqual([watchdog]);
    expect(runningWatchdog(host.dataDir)).toBe(watchdog);
    expect(await host.postmasterPid(inst.id)).toBe(postmaster);

    // Killed for good: nothing renews, nothing fences but the watchdog.
    await kill(second);
    const killedAt = monotonicMs();
    const { marginMs, leaseEndsAt } = await published();
    const endsAt = leaseEndsAt[inst.id]!;
    const refused = await waitFor(
      async () => {
        const why = await writeFails();
        return why !== undefined && { at: monotonicMs(), why };
      },
      60_000,
      "writes refused",
    );
    await waitFor(() => !processRunning(postmaster), 60_000, "the postmaster gone");
    const stopped = (await watchdogLog(host.dataDir)).find((l) => l.database_id === inst.id && Array.isArray(l.postmasters));
    console.log(
      `watchdog: agent killed ${Math.round(endsAt - killedAt)} ms before its lease's end; writes refused ` +
        `${Math.round(endsAt - refused.at)} ms before it (${refused.why}); the watchdog's log: ${JSON.stringify(stopped)}; ` +
        `its memory: ${/VmRSS:\s+(\d+ kB)/.exec(readFileSync(`/proc/${watchdog}/status`, "utf8"))?.[1]} resident`,
    );
    expect(stopped).toMatchObject({ postmasters: [postmaster] });
    // It acted at its time (lease end less its margin, give or take its 100 ms poll), not before...
    expect(stopped!.before_lease_end_ms as number).toBeLessThanOrEqual(marginMs);
    expect(refused.at).toBeGreaterThan(endsAt - marginMs - 200);
    // ...and before the lease ended, so before the control plane may promote (its own lease ends later, plus 2 s).
    expect(stopped!.before_lease_end_ms as number).toBeGreaterThan(0);
    expect(refused.at).toBeLessThan(endsAt + 2000);
    // The watchdog stays, idle, for the next agent.
    expect(runningWatchdog(host.dataDir)).toBe(watchdog);
  });
});
