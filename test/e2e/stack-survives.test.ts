/**
 * Issue 10, "a local stack that survives its operator": the runner as
 * `npm start` runs it (embedded metadata PostgreSQL, no Redis), its operator
 * commands through `npm run` with PORT set, and the kills an operator (or a
 * crash) inflicts: the metadata PostgreSQL, the runner itself, the runner and
 * an agent at once; and a stop that leaves nothing running, a lost agent's
 * PgBouncers and servers included.
 */
import { execFile } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { holdFilePath } from "../../deploy/local/supervisor.ts";
import { processesUnder } from "../faults/processes.ts";
import { createApi, waitFor, waitStatus } from "../support/api.ts";
import { holdDown } from "../support/ha.ts";
import { query } from "../support/pgclient.ts";
import { freePortBlock, restartStack, startStack, type Stack } from "../support/stack.ts";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * The bounds of this file's waits; a test's own timeout is the sum of its waits and a margin, so one that sticks
 * fails naming itself rather than as a bare "Test timed out".
 */
const NPM_RUN_MS = 60_000;
const RESTART_MS = 120_000;
const MARGIN_MS = 15_000;

let stack: Stack;
let api: ReturnType<typeof createApi>;
let db: any;

/** An operator command as a user runs it: `npm run <script> -- …`, with the stack's PORT, data dir and agents. */
async function npmRun(script: string, ...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await promisify(execFile)("npm", ["run", "-s", script, "--", ...args], {
      cwd: root,
      env: { ...process.env, ...stack.env },
      timeout: NPM_RUN_MS,
    });
    return { stdout, stderr, code: 0 };
  } catch (err) {
    const e = err as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}

/** Alive and not a zombie. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

const postmasterPid = (dir: string) => Number(readFileSync(join(dir, "postmaster.pid"), "utf8").split("\n")[0]);
const metadataDir = () => join(stack.dataDir, "metadata");
const instanceDir = (id: string) => join(stack.dataDir, "agents", "agent-fsn1", "instances", id);
/** Every pid the run's pid files name (runner excluded). */
const childPids = () =>
  readdirSync(join(stack.dataDir, "run"))
    .filter((f) => f.endsWith(".pid") && f !== "stack.pid")
    .map((f) => Number(readFileSync(join(stack.dataDir, "run", f), "utf8")));

async function statusOf(id: string) {
  return (await api.get(`/v1/databases/${id}`)).body.data?.status;
}

beforeAll(async () => {
  // No Redis (as `npm start` on a fresh machine); a small per-IP budget, so answers charged to the IP show up as 429s.
  stack = await startStack({ agents: "fsn1", env: { REDIS_URL: "", IP_RATE_LIMIT_PER_MINUTE: "10" } });
  api = createApi(stack.baseUrl);
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
});

describe("operator commands through npm run, PORT set", () => {
  it("set-plan puts the organization on internal", { timeout: NPM_RUN_MS + 60_000 + MARGIN_MS }, async () => {
    const account = await api.signup("ops");
    const res = await npmRun("set-plan", account.organization.id, "internal");
    expect(res.stderr).not.toMatch(/failed/);
    expect(res.stdout).toContain(`${account.organization.id} (Test Org) is on plan internal`);
    expect((await api.get("/v1/organization")).body.data.plan).toBe("internal");
    const created = await api.post("/v1/databases", { name: "kept", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    db = created.body.data;
    await waitStatus(api, db.id, "running", 60_000, () => stack.output());
  });

  it("agent:status shows what the agent runs", { timeout: NPM_RUN_MS + MARGIN_MS }, async () => {
    const res = await npmRun("agent:status");
    expect(res.code).toBe(0);
    // Its own pid, where it publishes (AGENT_PUBLIC_ADDRESS), its control address and how its servers are isolated.
    expect(res.stdout).toMatch(
      /agent-fsn1 \(fsn1\) pid \d+, publishes on 127\.0\.0\.1, control at http:\/\/127\.0\.0\.1:\d+: .* isolation per-tenant-uid/,
    );
    expect(res.stdout).toMatch(new RegExp(`${db.id}\\s+running\\s+port ${db.port}\\s+pid ${postmasterPid(instanceDir(db.id))}`));
  });

  it("maintenance switches the gateway of a stack without Redis, confirmed by it", { timeout: 3 * NPM_RUN_MS + MARGIN_MS }, async () => {
    const on = await npmRun("maintenance", "on", "--retry-after", "30");
    expect(on.stdout).toContain("maintenance mode is on (Retry-After: 30 s) (confirmed by the gateway at");
    const refused = await api.get("/v1/databases");
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("maintenance_mode");
    expect(refused.headers.get("retry-after")).toBe("30");
    expect((await npmRun("maintenance", "status")).stdout).toContain("maintenance mode is on (Retry-After: 30 s)");
    expect((await npmRun("maintenance", "off")).stdout).toContain("maintenance mode is off (confirmed by the gateway");
    expect((await api.get("/v1/databases")).status).toBe(200);
  });

  it("support:restore brings a deleted database back", { timeout: NPM_RUN_MS + MARGIN_MS }, async () => {
    const gone = (await api.post("/v1/databases", { name: "gone", region: "fsn1", tier: "micro" })).body.data;
    expect((await api.delete(`/v1/databases/${gone.id}`)).status).toBe(204);
    expect((await api.get(`/v1/databases/${gone.id}`)).status).toBe(404);
    const res = await npmRun("support:restore", gone.id);
    expect(res.stdout).toContain(`restored ${gone.id} (gone)`);
    expect((await api.get(`/v1/databases/${gone.id}`)).status).toBe(200);
  });
});

/** Reads and renames, one after another, until `until()`; every answer's status and when it came. */
async function traffic(until: () => boolean): Promise<Array<{ at: number; status: number; code?: string }>> {
  const seen: Array<{ at: number; status: number; code?: string }> = [];
  for (let i = 0; !until(); i++) {
    const res = i % 2 ? await api.get(`/v1/databases/${db.id}`) : await api.patch(`/v1/databases/${db.id}`, { name: `kept-${i}` });
    seen.push({ at: Date.now(), status: res.status, code: res.body?.error?.code });
    await sleep(50);
  }
  return seen;
}

describe("kill -9 of the metadata PostgreSQL", () => {
  it("is restarted at once; meanwhile 503s (never 500 or 429); correct answers within a few seconds", async () => {
    const before = postmasterPid(metadataDir());
    let done = false;
    const load = traffic(() => done);
    await sleep(500);
    const killedAt = Date.now();
    process.kill(before, "SIGKILL");
    await waitFor(async () => alive(postmasterPid(metadataDir())) && postmasterPid(metadataDir()) !== before, 10_000, "new postmaster", {
      everyMs: 100,
    });
    await sleep(killedAt + 6_000 - Date.now());
    done = true;
    const seen = await load;
    expect(seen.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([]);
    // Correct answers again within 5 s of the kill, and from then on only those.
    const failures = seen.filter((s) => s.status !== 200).map((s) => s.at - killedAt);
    // On failure, the keeper's account of the restart (how long clearing the old server and starting the new one took).
    const keeper = stack
      .output()
      .split("\n")
      .filter((l) => l.startsWith("metadata"))
      .slice(-4)
      .join("\n");
    expect(
      failures.filter((ms) => ms >= 5_000),
      keeper,
    ).toEqual([]);
    expect(seen.at(-1)!.status).toBe(200);
  });

  it("while it stays down: every answer a 503, health degraded, no budget spent; back within seconds", async () => {
    // Hold the keeper so the outage lasts: the postmaster is dead and nobody restarts it yet.
    const keeper = await stack.pid("metadata");
    process.kill(keeper, "SIGSTOP");
    try {
      process.kill(postmasterPid(metadataDir()), "SIGKILL");
      // Connections already open may answer for a moment: a backend notices its postmaster's death on its next wait.
      const health = await waitFor(
        async () => {
          const h = (await fetch(`${stack.baseUrl}/healthz`).then((r) => r.json())) as any;
          return h.status === "degraded" && Object.values(h.upstreams).every((s) => s === "unavailable") ? h : undefined;
        },
        5_000,
        "health degraded",
        { everyMs: 100 },
      );
      expect(health.upstreams).toEqual({ identity: "unavailable", databases: "unavailable", billing: "unavailable" });
      // More requests than the IP's minute budget (10): an outage charged to the IP would end in 429s.
      const end = Date.now() + 2_500;
      const seen = await traffic(() => Date.now() > end);
      expect(seen.length).toBeGreaterThan(12);
      expect(new Set(seen.map((s) => `${s.status} ${s.code}`))).toEqual(new Set(["503 service_unavailable"]));
    } finally {
      process.kill(keeper, "SIGCONT");
    }
    const resumed = Date.now();
    // Polled fast, as the 5 s it asserts needs: the organization is on the internal plan, which is never refused.
    await waitFor(async () => (await api.get(`/v1/databases/${db.id}`)).status === 200, 5_000, "correct answers again", { everyMs: 100 });
    expect(Date.now() - resumed).toBeLessThan(5_000);
    await waitFor(
      async () => ((await fetch(`${stack.baseUrl}/healthz`).then((r) => r.json())) as any).status === "ok",
      5_000,
      "health ok",
      {
        everyMs: 100,
      },
    );
    // The budget was never touched: signing up (a per-IP route) still works.
    await createApi(stack.baseUrl).signup("after-outage");
  });
});

describe("the runner dies or is stopped", () => {
  it("kill -9 of the runner: every child and every postgres stops; the next start works", {
    timeout: 30_000 + RESTART_MS + 60_000 + MARGIN_MS,
  }, async () => {
    const pids = [...childPids(), postmasterPid(metadataDir()), postmasterPid(instanceDir(db.id))];
    expect(pids.every(alive)).toBe(true);
    process.kill(stack.runnerPid, "SIGKILL");
    await stack.exited;
    await waitFor(async () => pids.every((p) => !alive(p)), 30_000, "the children gone", { everyMs: 100 });

    stack = await restartStack(stack);
    expect(stack.output()).not.toContain("already in use");
    await waitFor(
      async () => (await statusOf(db.id)) === "running" && (await query(db.connection_string, "SELECT 1")).length === 1,
      60_000,
      "back",
    );
  });

  it("a start while a stack runs is refused, naming npm run stop", async () => {
    await expect(restartStack(stack)).rejects.toThrow(/a stack is already running from .* \(runner pid \d+\): stop it with `npm run stop`/);
    // The refused start left the running stack alone.
    expect((await api.get(`/v1/databases/${db.id}`)).status).toBe(200);
    expect(await stack.pid("gateway")).toBeGreaterThan(0);
  });

  it("kill -9 of the runner and an agent at once: the next start stops the orphaned instance, then runs it again", {
    timeout: 2_000 + RESTART_MS + 60_000 + MARGIN_MS,
  }, async () => {
    const instance = postmasterPid(instanceDir(db.id));
    const agent = await stack.pid("agent-fsn1");
    process.kill(agent, "SIGKILL");
    process.kill(stack.runnerPid, "SIGKILL");
    await stack.exited;
    await sleep(2_000);
    // Its agent died before it could stop it: the instance is an orphan now.
    expect(alive(instance)).toBe(true);

    stack = await restartStack(stack);
    // Both databases of this file ("kept" and the restored "gone") were orphaned; the metadata PostgreSQL stopped with its keeper.
    expect(stack.output()).toMatch(new RegExp(`earlier run: stopping 2 PostgreSQL server\\(s\\): pid [\\d, ]*\\b${instance}\\b`));
    expect(alive(instance)).toBe(false);
    await waitFor(
      async () => (await statusOf(db.id)) === "running" && (await query(db.connection_string, "SELECT 1")).length === 1,
      60_000,
      "back",
    );
    expect(postmasterPid(instanceDir(db.id))).not.toBe(instance);
  });

  it("npm run stop stops a running stack", { timeout: 2 * NPM_RUN_MS + MARGIN_MS }, async () => {
    const pids = [stack.runnerPid, ...childPids(), postmasterPid(metadataDir()), postmasterPid(instanceDir(db.id))];
    const res = await npmRun("stop");
    expect(res.stdout).toContain(`stopping the stack running from ${stack.dataDir} (runner pid ${stack.runnerPid})`);
    expect(res.stdout).toContain("stopped.");
    expect(await stack.exited).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
    expect((await npmRun("stop")).stdout).toContain(`no stack is running from ${stack.dataDir}`);
  });
});

describe("nothing outlives a stopped stack", () => {
  it("a lost agent's PgBouncers and servers stop with the stack (SIGINT to the runner, as a test's teardown)", {
    timeout: RESTART_MS + 60_000 + 60_000 + NPM_RUN_MS + MARGIN_MS,
  }, async () => {
    stack = await restartStack(stack);
    await waitFor(async () => (await statusOf(db.id)) === "running", 60_000, "back");
    // Its pooler (on by default) runs as a PgBouncer whose ini lies below the data directory.
    const bouncers = () => processesUnder(stack.dataDir).filter((p) => /pgbouncer/.test(p) && p.includes(`/poolers/${db.id}/`));
    const bouncer = () => bouncers()[0];
    // The daemon itself: `pgbouncer -d` forks and its parent exits, so for a moment two carry the same command line
    // (a fresh-clone CI once took the parent for it); the pid file names the one that serves.
    const pidFile = join(stack.dataDir, "agents", "agent-fsn1", "poolers", db.id, "pgbouncer.pid");
    const running = await waitFor(
      async () => {
        const found = bouncers();
        let pid = "";
        try {
          pid = readFileSync(pidFile, "utf8").trim();
        } catch {
          return undefined;
        }
        return found.length === 1 && found[0]!.startsWith(`pid ${pid}:`) ? found[0] : undefined;
      },
      60_000,
      "the pooler's PgBouncer",
    );
    const instance = postmasterPid(instanceDir(db.id));
    // A lost host, simulated: the agent's restart held and the agent killed -9. What it ran serves on (by design:
    // the next agent keeps it), so nothing but the stack's stop is left to end it.
    await holdDown(stack, "agent-fsn1");
    await sleep(1_000);
    expect(alive(instance)).toBe(true);
    expect(bouncer()).toBe(running);
    try {
      await stack.stop();
      // The check the fault suite makes after its stack stopped (test/faults/processes.ts): no process of the run left.
      expect(processesUnder(stack.dataDir)).toEqual([]);
      expect(stack.output()).toMatch(/left running: stopping \d+ connection pooler\(s\)/);
    } finally {
      await rm(holdFilePath(stack.dataDir, "agent-fsn1"), { force: true });
      // What a failing run left (its PgBouncers never stop on their own): `npm run stop` ends it.
      if (processesUnder(stack.dataDir).length > 0) await npmRun("stop");
    }
  });
});

describe("settings that cannot run", () => {
  it("refuses a metadata port inside the instance port range before starting anything", async () => {
    const base = await freePortBlock(40);
    const dataDir = join(stack.dataDir, "overlap");
    try {
      await expect(
        startStack({ dataDir, agents: "fsn1", env: { INSTANCE_PORT_BASE: String(base), METADATA_PG_PORT: String(base + 5) } }),
      ).rejects.toThrow(
        `METADATA_PG_PORT=${base + 5} (metadata PostgreSQL) lies inside the instance ports of agent-fsn1 (${base}–${base + 29}`,
      );
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
