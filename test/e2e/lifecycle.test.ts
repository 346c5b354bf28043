/**
 * Issue 3: every database operation acts on the real PostgreSQL instance,
 * driven by the agents, with two agents placed by region.
 */
import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, statusOf, waitFor, waitStatus as waitForStatus } from "../support/api.ts";
import { query } from "../support/pgclient.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_lifecycle");
  // Two agents: agent-fsn1 serves fsn1, agent-nbg1 serves nbg1 and hel1.
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1;nbg1,hel1" });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

/**
 * A fresh organization per test keeps each within the free plan's 60 requests a minute; its card lets it
 * run more than the free allowance (2 micro databases).
 */
async function account() {
  const api = createApi(stack.baseUrl);
  await api.signup("life");
  await api.addPaymentMethod();
  return api;
}

/** How long one wait for a status may take; each test's own timeout is the sum of its waits, plus a margin. */
const WAIT_MS = 60_000;
/** A wait across a kill -9 (the killed process restarts, reconnects and catches up first). */
const CRASH_WAIT_MS = 90_000;
const MARGIN_MS = 15_000;

/** Waits for `status`; a timeout names the last status, the operations and the stack's log lines about it. */
const waitStatus = (api: ReturnType<typeof createApi>, id: string, status: string, timeoutMs = WAIT_MS) =>
  waitForStatus(api, id, status, timeoutMs, () => stack.output());

async function createRunning(api: ReturnType<typeof createApi>, body: Record<string, string>) {
  const res = await api.post("/v1/databases", body);
  expect(res.status).toBe(201);
  await waitStatus(api, res.body.data.id, "running");
  return res.body.data;
}

const refused = (cs: string) => expect(query(cs, "SELECT 1")).rejects.toThrow();

describe("lifecycle on real instances", () => {
  it("stops, refuses connections, starts again, restarts; wrong sources are 409 naming the status", {
    timeout: 4 * WAIT_MS + MARGIN_MS,
  }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "life-1", region: "fsn1", tier: "micro" });

    const stop = await api.post(`/v1/databases/${db.id}/stop`);
    expect(stop.status).toBe(200);
    expect(stop.body.data).toEqual({ id: db.id, status: "stopping" });
    await waitStatus(api, db.id, "stopped");
    await refused(db.connection_string);

    const again = await api.post(`/v1/databases/${db.id}/stop`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("resource_conflict");
    expect(again.body.error.message).toContain("stopped");
    expect((await api.post(`/v1/databases/${db.id}/restart`)).status).toBe(409);

    const start = await api.post(`/v1/databases/${db.id}/start`);
    expect(start.body.data).toEqual({ id: db.id, status: "starting" });
    await waitStatus(api, db.id, "running");
    const before = await query(db.connection_string, "SELECT pg_postmaster_start_time() AS t");
    expect((await api.post(`/v1/databases/${db.id}/start`)).status).toBe(409);

    const restart = await api.post(`/v1/databases/${db.id}/restart`);
    expect(restart.body.data).toEqual({ id: db.id, status: "restarting" });
    await waitStatus(api, db.id, "running");
    const after = await query(db.connection_string, "SELECT pg_postmaster_start_time() AS t");
    expect(after[0].t.getTime()).toBeGreaterThan(before[0].t.getTime());

    const ops = await api.get(`/v1/databases/${db.id}/operations`);
    expect(ops.status).toBe(200);
    // The lifecycle's operations; the database's first backup (taken as soon as it runs) has its own entries.
    const lifecycle = ops.body.data.operations.filter((o: any) => o.type !== "backup");
    const types = lifecycle.map((o: any) => `${o.type}:${o.status}`);
    expect(types).toEqual(["restart:succeeded", "start:succeeded", "stop:succeeded", "create:succeeded"]);
    for (const o of lifecycle) expect(o.finished_at >= o.started_at).toBe(true);
  });

  it("bills compute only while running", { timeout: 3 * WAIT_MS + 2 * 30_000 + MARGIN_MS }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "life-bill", region: "fsn1", tier: "small" });
    await api.post(`/v1/databases/${db.id}/stop`);
    await waitStatus(api, db.id, "stopped");
    const hours = async () => (await api.get("/v1/billing/usage")).body.data.usage.compute.hours as number;
    // The outbox delivers the stop; after that the meter must stand still.
    const { stopped } = await waitFor(
      async () => {
        const a = await hours();
        await new Promise((r) => setTimeout(r, 1500));
        return a === (await hours()) ? { stopped: a } : undefined;
      },
      30_000,
      "meter stopped",
    );
    await new Promise((r) => setTimeout(r, 2500));
    expect(await hours()).toBe(stopped);

    await api.post(`/v1/databases/${db.id}/start`);
    await waitStatus(api, db.id, "running");
    await waitFor(async () => (await hours()) > stopped, 30_000, "meter running again");
  });

  it("resizes up and down, visible through SHOW; same tier is 422", { timeout: 6 * WAIT_MS + MARGIN_MS }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "life-2", region: "fsn1", tier: "micro" });
    const show = async () =>
      (await query(db.connection_string, "SELECT current_setting('shared_buffers') AS sb, current_setting('max_connections') AS mc"))[0];
    const micro = await show();

    const same = await api.post(`/v1/databases/${db.id}/resize`, { tier: "micro" });
    expect(same.status).toBe(422);
    expect(same.body.error.details[0].field).toBe("tier");

    const up = await api.post(`/v1/databases/${db.id}/resize`, { tier: "small" });
    expect(up.status).toBe(200);
    expect(up.body.data).toEqual({ id: db.id, tier: "small", status: "resizing" });
    await waitStatus(api, db.id, "running");
    const small = await show();
    expect(small.sb).not.toBe(micro.sb);
    expect(Number(small.mc)).toBeGreaterThan(Number(micro.mc));
    expect((await api.get(`/v1/databases/${db.id}`)).body.data.tier).toBe("small");

    await api.post(`/v1/databases/${db.id}/resize`, { tier: "micro" });
    await waitStatus(api, db.id, "running");
    expect(await show()).toEqual(micro);

    // Resizing a stopped database keeps it stopped; the new settings apply on start.
    await api.post(`/v1/databases/${db.id}/stop`);
    await waitStatus(api, db.id, "stopped");
    await api.post(`/v1/databases/${db.id}/resize`, { tier: "small" });
    await waitStatus(api, db.id, "stopped");
    await api.post(`/v1/databases/${db.id}/start`);
    await waitStatus(api, db.id, "running");
    expect(await show()).toEqual(small);
  });

  it("resets the password synchronously, running and stopped", { timeout: 3 * WAIT_MS + MARGIN_MS }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "life-3", region: "fsn1", tier: "micro" });
    const reset = await api.post(`/v1/databases/${db.id}/reset-password`);
    expect(reset.status).toBe(200);
    expect(Object.keys(reset.body.data).sort()).toEqual(["connection_string", "password"]);
    expect(reset.body.data.password).not.toBe(db.password);
    // Right after the 200: the old password is refused, the new one works.
    await expect(query(db.connection_string, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    expect(await query(reset.body.data.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);

    await api.post(`/v1/databases/${db.id}/stop`);
    await waitStatus(api, db.id, "stopped");
    const whileStopped = await api.post(`/v1/databases/${db.id}/reset-password`);
    expect(whileStopped.status).toBe(200);
    await api.post(`/v1/databases/${db.id}/start`);
    await waitStatus(api, db.id, "running");
    await expect(query(reset.body.data.connection_string, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    expect(await query(whileStopped.body.data.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("renames, refuses a duplicate name, deletes, and support restores within the window", {
    timeout: 3 * WAIT_MS + 2 * 30_000 + MARGIN_MS,
  }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "life-4", region: "nbg1", tier: "micro" });
    await createRunning(api, { name: "life-4b", region: "nbg1", tier: "micro" });

    const renamed = await api.patch(`/v1/databases/${db.id}`, { name: "life-4-renamed" });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data.name).toBe("life-4-renamed");
    expect((await api.patch(`/v1/databases/${db.id}`, { name: "life-4b" })).status).toBe(409);

    const del = await api.delete(`/v1/databases/${db.id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    expect((await api.get(`/v1/databases/${db.id}`)).status).toBe(404);
    expect((await api.get("/v1/databases")).body.data.databases.map((d: any) => d.id)).not.toContain(db.id);
    await waitFor(
      async () => {
        try {
          await query(db.connection_string, "SELECT 1");
          return false;
        } catch {
          return true;
        }
      },
      30_000,
      "instance stopped after delete",
      { everyMs: 100 },
    );

    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "services/databases/src/cli/restore.ts", db.id], {
      env: { ...process.env, DATABASES_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 2}`, DBAAS_DATA_DIR: stack.dataDir },
      timeout: 30_000,
    });
    expect(stdout).toContain(`restored ${db.id}`);
    await waitStatus(api, db.id, "running");
    // Same data, same password: the instance was only stopped, never removed.
    expect(await query(db.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("places databases on the agent of their region, runs version 16, and serves the CA for verify-full", {
    timeout: 2 * WAIT_MS + MARGIN_MS,
  }, async () => {
    const api = await account();
    const fsn = await createRunning(api, { name: "life-5a", region: "fsn1", tier: "micro" });
    const hel = await createRunning(api, { name: "life-5b", region: "hel1", tier: "micro", version: "16" });
    const base = Number(stack.env.INSTANCE_PORT_BASE);
    const perAgent = Number(stack.env.AGENT_CAPACITY);
    // agent-fsn1 owns the first port range, agent-nbg1 (nbg1, hel1) the second.
    expect(fsn.port).toBeGreaterThanOrEqual(base);
    expect(fsn.port).toBeLessThan(base + perAgent);
    expect(hel.port).toBeGreaterThanOrEqual(base + perAgent);
    expect(hel.port).toBeLessThan(base + 2 * perAgent);

    const v = await query(hel.connection_string, "SELECT current_setting('server_version') AS v");
    expect(v[0].v).toMatch(/^16\./);

    const ca = await api.get(`/v1/databases/${fsn.id}/ca-certificate`);
    expect(ca.status).toBe(200);
    expect(ca.headers.get("content-type")).toContain("application/x-pem-file");
    expect(ca.body).toContain("BEGIN CERTIFICATE");
    expect(await query(fsn.connection_string, "SELECT 1 AS one", ca.body)).toEqual([{ one: 1 }]);
    // The other agent's CA does not vouch for this instance.
    const otherCa = (await api.get(`/v1/databases/${hel.id}/ca-certificate`)).body;
    await expect(query(fsn.connection_string, "SELECT 1", otherCa)).rejects.toThrow();

    const regions = await api.get("/v1/regions");
    expect(regions.body.data.regions.map((r: any) => r.code)).toEqual(["fsn1", "nbg1", "hel1"]);
    const tiers = await api.get("/v1/tiers");
    expect(tiers.body.data.tiers[0]).toEqual({ name: "micro", vcpu: 1, memory_gb: 1, storage_gb: 10, hourly_price: 0.02 });
    expect(tiers.body.data.tiers.map((t: any) => t.name)).toEqual(["micro", "small", "medium", "large", "xlarge"]);
    const versions = await api.get("/v1/versions");
    expect(versions.body.data.versions).toEqual(
      expect.arrayContaining([
        { version: "17", default: true },
        { version: "16", default: false },
      ]),
    );
  });
});

describe("crash safety", () => {
  it("converges after the agent is killed -9 in the middle of provisioning and of stopping", {
    timeout: 2 * CRASH_WAIT_MS + MARGIN_MS,
  }, async () => {
    const api = await account();
    const res = await api.post("/v1/databases", { name: "crash-1", region: "fsn1", tier: "micro" });
    process.kill(await stack.pid("agent-fsn1"), "SIGKILL");
    await waitStatus(api, res.body.data.id, "running", CRASH_WAIT_MS);
    expect(await query(res.body.data.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);

    await api.post(`/v1/databases/${res.body.data.id}/stop`);
    process.kill(await stack.pid("agent-fsn1"), "SIGKILL");
    await waitStatus(api, res.body.data.id, "stopped", CRASH_WAIT_MS);
    await refused(res.body.data.connection_string);
  });

  it("converges after the agent is killed -9 in the middle of resizing", { timeout: WAIT_MS + CRASH_WAIT_MS + MARGIN_MS }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "crash-resize", region: "fsn1", tier: "micro" });
    const before = (await query(db.connection_string, "SELECT current_setting('max_connections') AS mc"))[0].mc;
    await api.post(`/v1/databases/${db.id}/resize`, { tier: "medium" });
    process.kill(await stack.pid("agent-fsn1"), "SIGKILL");
    await waitStatus(api, db.id, "running", CRASH_WAIT_MS);
    const after = (await query(db.connection_string, "SELECT current_setting('max_connections') AS mc"))[0].mc;
    expect(Number(after)).toBeGreaterThan(Number(before));
    // Exactly one instance directory and one postmaster for the database: nothing duplicated or orphaned.
    const dirs = readdirSync(join(stack.dataDir, "agents", "agent-fsn1", "instances"), { withFileTypes: true })
      .filter((d) => d.isDirectory() && d.name.startsWith(db.id))
      .map((d) => d.name);
    expect(dirs).toEqual([db.id]);
  });

  it("converges after the databases service is killed -9", { timeout: WAIT_MS + CRASH_WAIT_MS + MARGIN_MS }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "crash-2", region: "fsn1", tier: "micro" });
    await api.post(`/v1/databases/${db.id}/restart`);
    process.kill(await stack.pid("databases"), "SIGKILL");
    await waitStatus(api, db.id, "running", CRASH_WAIT_MS);
    expect(await query(db.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("notices a postgres instance that died on its own and starts it again", { timeout: 2 * WAIT_MS + MARGIN_MS }, async () => {
    const api = await account();
    const db = await createRunning(api, { name: "crash-3", region: "fsn1", tier: "micro" });
    const pidFile = join(stack.dataDir, "agents", "agent-fsn1", "instances", db.id, "postmaster.pid");
    const postmaster = Number((await readFile(pidFile, "utf8")).split("\n")[0]);
    process.kill(postmaster, "SIGKILL");
    await refused(db.connection_string);
    await waitFor(async () => (await query(db.connection_string, "SELECT 1 AS one"))[0].one === 1, 60_000, "instance restarted", {
      everyMs: 100,
    });
    expect(await statusOf(api, db.id)).toBe("running");
  });
});
