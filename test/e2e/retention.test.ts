/**
 * Deleted databases are kept for the retention window, then purged by their
 * agent; and an operation that cannot complete ends in `failed` with a reason,
 * and can be retried.
 */
import { appendFile, readFile, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor, waitStatus } from "../support/api.ts";
import { query } from "../support/pgclient.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_retention");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: { DELETED_RETENTION_SECONDS: "2", PURGE_SWEEP_INTERVAL_MS: "500" },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

/** A wait for a status; each test's own timeout is the sum of its waits, so one that sticks fails naming itself. */
const WAIT_MS = 60_000;
const MARGIN_MS = 15_000;

const instanceDir = (id: string) => join(stack.dataDir, "agents", "agent-fsn1", "instances", id);

async function createRunning(api: ReturnType<typeof createApi>, name: string) {
  const res = await api.post("/v1/databases", { name, region: "fsn1", tier: "micro" });
  expect(res.status).toBe(201);
  await waitStatus(api, res.body.data.id, "running", WAIT_MS, () => stack.output());
  return res.body.data;
}

describe("retention and failure", () => {
  it("purges a deleted database's data after the retention window", { timeout: 3 * WAIT_MS + 30_000 + MARGIN_MS }, async () => {
    const api = createApi(stack.baseUrl);
    await api.signup("purge");
    const db = await createRunning(api, "purge-me");
    expect(existsSync(instanceDir(db.id))).toBe(true);
    // Its first backup is in the store; a deleted database's backups stay until its data is purged, then go with it.
    const backups = join(stack.dataDir, "backups", db.id);
    await waitFor(async () => existsSync(join(backups, "wal")), WAIT_MS, "archived WAL in the store", { everyMs: 100 });
    expect((await api.delete(`/v1/databases/${db.id}`)).status).toBe(204);
    await waitFor(async () => !existsSync(instanceDir(db.id)), 30_000, "data directory purged", { everyMs: 100 });
    expect(existsSync(backups)).toBe(false);
    // The name is free again and the port can be reused by the next database.
    const again = await createRunning(api, "purge-me");
    expect(again.id).not.toBe(db.id);
  });

  it("ends in failed with a visible reason when an instance cannot start, and recovers when retried", {
    timeout: 3 * WAIT_MS + 30_000 + MARGIN_MS,
  }, async () => {
    const api = createApi(stack.baseUrl);
    await api.signup("fail");
    const db = await createRunning(api, "fail-me");
    await api.post(`/v1/databases/${db.id}/stop`);
    await waitStatus(api, db.id, "stopped", 30_000, () => stack.output());

    // Break the instance the way a bad host or disk would: its configuration no longer parses.
    const conf = join(instanceDir(db.id), "postgresql.conf");
    const original = await readFile(conf, "utf8");
    await appendFile(conf, "\nthis_setting_does_not_exist = on\n");

    expect((await api.post(`/v1/databases/${db.id}/start`)).status).toBe(200);
    const failed = await waitFor(
      async () => {
        const got = (await api.get(`/v1/databases/${db.id}`)).body.data;
        return got.status === "failed" ? got : undefined;
      },
      WAIT_MS,
      "failed",
    );
    expect(failed.status_reason).toMatch(/this_setting_does_not_exist|could not start|exited/);
    const ops = (await api.get(`/v1/databases/${db.id}/operations`)).body.data.operations;
    expect(ops[0]).toMatchObject({ type: "start", status: "failed" });
    expect(ops[0].error).toBeTruthy();

    // Retrying is allowed from failed; once the cause is gone the database runs again.
    await writeFile(conf, original);
    const retry = await api.post(`/v1/databases/${db.id}/restart`);
    expect([200, 409]).toContain(retry.status);
    await waitStatus(api, db.id, "running", WAIT_MS, () => stack.output());
    expect(await query(db.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
    expect((await api.get(`/v1/databases/${db.id}`)).body.data.status_reason).toBeUndefined();
  });
});
