/**
 * Issue 12: backups and point-in-time restore on the real stack with the file
 * store (the local default). Two agents serve fsn1, so a restore lands on the
 * agent that does not hold the source: the store is shared, not the host's disk.
 * The S3 store runs the same scenario in backups-s3.test.ts.
 */
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor } from "../support/api.ts";
import { query } from "../support/pgclient.ts";
import {
  backupsOf,
  logAbout,
  pitrRoundTrip,
  takeBackup,
  waitBackupsSettled,
  waitFirstBackup,
  waitRestorableThrough,
  waitRunning,
  type Api,
} from "../support/backups.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_backups");
  // agent-fsn1 serves fsn1; agent-nbg1 serves nbg1 and fsn1.
  // A 5 s archive_timeout: the restore window's latest instant trails the last commit by it (30 s by default).
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1;nbg1,fsn1",
    env: { BACKUP_SCHEDULE_INTERVAL_MS: "1000", BACKUP_ARCHIVE_TIMEOUT_S: "5" },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

async function account(): Promise<Api> {
  const api = createApi(stack.baseUrl);
  await api.signup("bkp");
  await api.addPaymentMethod();
  return api;
}

/** The agent whose instances directory holds `id`. */
async function agentOf(id: string): Promise<string | undefined> {
  for (const agent of await readdir(join(stack.dataDir, "agents"))) {
    if (existsSync(join(stack.dataDir, "agents", agent, "instances", id))) return agent;
  }
  return undefined;
}

describe("backups and point-in-time restore (file store)", () => {
  // First in the file, on an empty stack: both agents serve fsn1 with the same capacity, so the source goes to
  // agent-fsn1 (a tie is broken by id) and its restore in the same region to agent-nbg1, which then has the most free
  // capacity. The restore's base backup and WAL come from the shared store: nothing of the source's host is used.
  it("restores onto the other agent of the same region", async () => {
    const r = await pitrRoundTrip(await account(), { name: "pitr-same-region", version: "17", region: "fsn1", restoreRegion: "fsn1" });
    expect(await agentOf(r.source.id)).toBe("agent-fsn1");
    expect(r.atTarget.region).toBe("fsn1");
    expect(await agentOf(r.atTarget.id)).toBe("agent-nbg1");
  }, 300_000);

  it("restores exactly the transactions committed up to restore_time, on 16 and 17, onto the other agent", async () => {
    // The sources run in nbg1, where only agent-nbg1 is; their restores to T go to fsn1, where agent-fsn1 has the
    // most free capacity: the data comes from the shared store, not from the source's host.
    const results = await Promise.all(
      ["16", "17"].map(async (version) =>
        pitrRoundTrip(await account(), { name: `pitr-${version}`, version, region: "nbg1", restoreRegion: "fsn1" }),
      ),
    );
    for (const r of results) {
      expect(await agentOf(r.source.id)).toBe("agent-nbg1");
      expect(r.atTarget.region).toBe("fsn1");
    }
    expect(await Promise.all(results.map((r) => agentOf(r.atTarget.id)))).toContain("agent-fsn1");
  }, 300_000);

  it("lists backups with the window, takes one on demand (409 while it runs), and shows them in the operations log", async () => {
    const api = await account();
    const created = await api.post("/v1/databases", { name: "bkp-list", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    await waitRunning(api, id);
    const first = await waitFirstBackup(api, id);
    expect(first.type).toBe("scheduled");
    expect(first.size_bytes).toBeGreaterThan(0);

    const manual = await api.post(`/v1/databases/${id}/backups`);
    expect(manual.status).toBe(202);
    expect(manual.body.data).toMatchObject({ type: "manual", status: "running" });
    const again = await api.post(`/v1/databases/${id}/backups`);
    // Either the first is still running (409) or it finished already and this one starts.
    if (again.status === 409) expect(again.body.error.message).toMatch(/backup/);
    else expect(again.status).toBe(202);
    await waitBackupsSettled(api, id);

    const list = await api.get(`/v1/databases/${id}/backups`);
    expect(list.status).toBe(200);
    const backups = list.body.data.backups;
    expect(backups.length).toBeGreaterThanOrEqual(2);
    expect(backups.every((b: { status: string }) => b.status === "completed")).toBe(true);
    // Newest first.
    expect(Date.parse(backups[0].started_at)).toBeGreaterThanOrEqual(Date.parse(backups[1].started_at));
    expect(list.body.meta.total).toBe(backups.length);
    expect(Date.parse(list.body.data.earliest_restore_time)).toBeLessThanOrEqual(Date.parse(list.body.data.latest_restore_time));
    expect(list.body.data.wal_archiving).toEqual({ status: "healthy", error: null });

    const ops = await api.get(`/v1/databases/${id}/operations?per_page=100`);
    const types = ops.body.data.operations.map((o: { type: string }) => o.type);
    expect(types).toContain("backup");
  }, 180_000);

  it("refuses a restore_time outside the window with a 422 naming it, and a backup of a stopped database with a 409", async () => {
    const api = await account();
    const created = await api.post("/v1/databases", { name: "bkp-window", region: "fsn1", tier: "micro" });
    const id = created.body.data.id;
    await waitRunning(api, id);
    await waitFirstBackup(api, id);
    const list = await api.get(`/v1/databases/${id}/backups`);
    const earliest = Date.parse(list.body.data.earliest_restore_time);

    const tooEarly = await api.post(`/v1/databases/${id}/restore`, {
      name: "too-early",
      restore_time: new Date(earliest - 3_600_000).toISOString(),
    });
    expect(tooEarly.status).toBe(422);
    expect(tooEarly.body.error.details.some((d: { field: string }) => d.field === "restore_time")).toBe(true);
    expect(JSON.stringify(tooEarly.body.error)).toContain(new Date(earliest).toISOString());
    const future = await api.post(`/v1/databases/${id}/restore`, {
      name: "future",
      restore_time: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(future.status).toBe(422);

    await api.post(`/v1/databases/${id}/stop`);
    await waitRunning(api, id, "stopped");
    const stopped = await api.post(`/v1/databases/${id}/backups`);
    expect(stopped.status).toBe(409);
    expect(stopped.body.error.message).toContain("stopped");
  }, 180_000);

  it("kill -9 of the agent during a base backup and during a restore: retried or failed with a reason, and the restore converges", async () => {
    const api = await account();
    const created = await api.post("/v1/databases", { name: "bkp-crash", region: "nbg1", tier: "micro" });
    const db = created.body.data;
    await waitRunning(api, db.id);
    await waitFirstBackup(api, db.id);
    await query(db.connection_string, "CREATE TABLE t AS SELECT generate_series(1, 5000) AS n");
    const tCommitted = new Date();

    const b = await takeBackup(api, db.id);
    process.kill(await stack.pid("agent-nbg1"), "SIGKILL");
    const settled = await waitBackupsSettled(api, db.id, 120_000, () => stack.output());
    const mine = settled.find((x) => x.id === b.id);
    if (!mine) throw new Error(`backup ${b.id} is not listed`);
    if (mine.status === "failed") expect(mine.failure_reason).toBeTruthy();
    else expect(mine.status).toBe("completed");
    // Nothing listed as completed lacks its files in the store.
    for (const x of settled.filter((x) => x.status === "completed")) {
      expect(existsSync(join(stack.dataDir, "backups", db.id, "base", x.id, "backup.json"))).toBe(true);
      expect(existsSync(join(stack.dataDir, "backups", db.id, "base", x.id, "base.tar.gz"))).toBe(true);
    }

    const written = new Date();
    await waitRestorableThrough(api, db.id, written);
    // nbg1 has one agent: the restore runs on the agent killed here, half-way through.
    const restored = await api.post(`/v1/databases/${db.id}/restore`, { name: "after-crash" });
    expect(restored.status).toBe(201);
    await new Promise((r) => setTimeout(r, 700));
    process.kill(await stack.pid("agent-nbg1"), "SIGKILL");
    await waitRunning(api, restored.body.data.id, "running", 180_000);
    // The agent restarted moments ago and its proxy serves the port anew: a connection caught in that may be
    // reset, and a client reconnects (what the proxy promises). Only connection errors are retried.
    const rows = await waitFor(
      async () => {
        try {
          return await query(restored.body.data.connection_string, "SELECT count(*)::int AS n FROM t");
        } catch (err) {
          if (/ECONNRESET|ECONNREFUSED|Connection terminated/.test((err as Error).message)) return undefined;
          // Seen twice in ~17 runs under heavy load, never reproduced: what the agent did for this restore, and the
          // window it was asked within, say which of the backup, the WAL or the target was short.
          const window = await backupsOf(api, db.id).catch(() => undefined);
          throw new Error(
            `${(err as Error).message} — restored ${restored.body.data.id} to ${restored.body.data.restored_from?.restore_time} ` +
              `(t created before ${tCommitted.toISOString()}, written ${written.toISOString()}; source backups ` +
              `${JSON.stringify(window?.backups.map((x) => [x.id, x.status, x.started_at, x.completed_at]))}, window ` +
              `${window?.earliest_restore_time} to ${window?.latest_restore_time})\n` +
              `stack log about both:\n${logAbout(stack.output(), [db.id, restored.body.data.id], 120)}`,
            { cause: err },
          );
        }
      },
      20_000,
      "the restored database answering",
    );
    expect(rows).toEqual([{ n: 5000 }]);
    const ops = await api.get(`/v1/databases/${restored.body.data.id}/operations?per_page=100`);
    expect(ops.body.data.operations.some((o: { type: string; status: string }) => o.type === "restore" && o.status === "succeeded")).toBe(
      true,
    );
  }, 360_000);
});
