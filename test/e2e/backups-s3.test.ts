/**
 * Issue 12 with the S3 store: the agent archives and backs up into a real
 * S3-compatible server (s3rver, started here), a restore reads from it, and a
 * store that stops answering shows on the database (wal_archiving, operations)
 * until it answers again, without losing WAL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { backupsOf, pitrRoundTrip, poll, waitFirstBackup, waitRestorableThrough, waitRunning, type Api } from "../support/backups.ts";
import { query } from "../support/pgclient.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startS3Server, type S3Server } from "../support/s3-server.ts";
import { startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;
let s3: S3Server;

beforeAll(async () => {
  s3 = await startS3Server("dbaas-e2e", "backups");
  meta = await createTestDatabase("e2e_backups_s3");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: {
      BACKUP_STORE_URL: s3.url,
      ...s3.env,
      BACKUP_SCHEDULE_INTERVAL_MS: "1000",
      // A 5 s archive_timeout: the restore window's latest instant trails the last commit by it (30 s by default).
      BACKUP_ARCHIVE_TIMEOUT_S: "5",
      // The outage test's waits: a stalled store is given up after 5 s idle (twice: the SDK retries once) rather
      // than 30 s, and a failing upload is retried at most 2 s apart rather than 30 s.
      BACKUP_S3_IDLE_TIMEOUT_MS: "5000",
      BACKUP_UPLOAD_RETRY_MAX_MS: "2000",
    },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
  await s3?.close();
});

async function account(): Promise<Api> {
  const api = createApi(stack.baseUrl);
  await api.signup("bkps3");
  await api.addPaymentMethod();
  return api;
}

describe("backups and point-in-time restore (S3 store)", () => {
  it("restores exactly the transactions committed up to restore_time, on 16 and 17", async () => {
    // An organization each: every one may make 60 requests a minute.
    await Promise.all(["16", "17"].map(async (version) => pitrRoundTrip(await account(), { name: `s3-pitr-${version}`, version })));
  }, 300_000);

  it("an unreachable store shows as failing WAL archiving, and nothing is lost when it answers again", async () => {
    const api = await account();
    const created = await api.post("/v1/databases", { name: "s3-outage", region: "fsn1", tier: "micro" });
    const db = created.body.data;
    await waitRunning(api, db.id);
    await waitFirstBackup(api, db.id);
    await query(db.connection_string, "CREATE TABLE t (n int)");

    s3.suspend();
    try {
      await query(db.connection_string, "INSERT INTO t SELECT generate_series(1, 1000)");
      const failing = await poll(
        async () => {
          const w = (await backupsOf(api, db.id)).wal_archiving;
          return w.status === "failing" && w;
        },
        120_000,
        "wal_archiving failing",
      );
      expect(failing.error).toBeTruthy();
      const ops = await api.get(`/v1/databases/${db.id}/operations?per_page=100`);
      expect(
        ops.body.data.operations.some((o: { type: string; status: string }) => o.type === "wal_archive" && o.status === "failed"),
      ).toBe(true);
    } finally {
      s3.resume();
    }
    const written = new Date();
    await poll(async () => (await backupsOf(api, db.id)).wal_archiving.status === "healthy", 120_000, "archiving healthy again");
    await waitRestorableThrough(api, db.id, written);
    const restored = await api.post(`/v1/databases/${db.id}/restore`, { name: "s3-after-outage" });
    expect(restored.status).toBe(201);
    await waitRunning(api, restored.body.data.id, "running", 180_000);
    expect(await query(restored.body.data.connection_string, "SELECT count(*)::int AS n FROM t")).toEqual([{ n: 1000 }]);
  }, 360_000);
});
