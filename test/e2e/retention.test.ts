/**
 * Deleted databases are kept for the retention window, then purged by their
 * agent; and an operation that cannot complete ends in `failed` with a reason,
 * and can be retried.
 */
import { appendFile, readFile, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor } from "../support/api.ts";
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

const instanceDir = (id: string) => join(stack.dataDir, "agents", "agent-fsn1", "instances", id);

async function createRunning(api: ReturnType<typeof createApi>, name: string) {
  const res = await api.post("/v1/databases", { name, region: "fsn1", tier: "micro" });
  expect(res.status).toBe(201);
  await waitFor(async () => (await api.get(`/v1/databases/${res.body.data.id}`)).body.data.status === "running", 60_000, "running");
  return res.body.data;
}

describe("retention and failure", () => {
  it("purges a deleted database's data after the retention window", async () => {
    const api = createApi(stack.baseUrl);
    await api.signup("purge");
    const db = await createRunning(api, "purge-me");
    expect(existsSync(instanceDir(db.id))).toBe(true);
    // Its first backup is in the store; a deleted database's backups stay until its data is purged, then go with it.
    const backups = join(stack.dataDir, "backups", db.id);
    await waitFor(async () => existsSync(join(backups, "wal")), 60_000, "archived WAL in the store");
    expect((await api.delete(`/v1/databases/${db.id}`)).status).toBe(204);
    await waitFor(async () => !existsSync(instanceDir(db.id)), 30_000, "data directory purged");
    expect(existsSync(backups)).toBe(false);
    // The name is free again and the port can be reused by the next database.
    const again = await createRunning(api, "purge-me");
    expect(again.id).not.toBe(db.id);
  });

  it("ends in failed with a visible reason when an instance cannot start, and recovers when retried", async () => {
    const api = createApi(stack.baseUrl);
    await api.signup("fail");
    const db = await createRunning(api, "fail-me");
    await api.post(`/v1/databases/${db.id}/stop`);
    await waitFor(async () => (await api.get(`/v1/databases/${db.id}`)).body.data.status === "stopped", 30_000, "stopped");

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
      60_000,
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
    await waitFor(async () => (await api.get(`/v1/databases/${db.id}`)).body.data.status === "running", 60_000, "running again");
    expect(await query(db.connection_string, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
    expect((await api.get(`/v1/databases/${db.id}`)).body.data.status_reason).toBeUndefined();
  });
});
