import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { BackupState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKUP_ATTEMPTS } from "../../src/backups/attempts.ts";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { takeBaseBackup } from "../../src/backups/base-backup.ts";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { baseTarKey, manifestKey, recordKey } from "../../src/backups/layout.ts";
import { type Fixture, managerFor, shutdown, startFixture, view, waitFor } from "./support.ts";

// Base backups that do not go to plan: a kill half-way, an attempt cut off
// mid-flight, a store that refuses them. Whatever happens, a record (the
// "completed" marker) exists only with its files, and a failed backup is
// retried until its third attempt.

/** Every record in the store has its tar and manifest. */
async function assertNoRecordWithoutFiles(store: BlobStore, id: string): Promise<void> {
  for (const { key } of await store.list(`${id}/base/`)) {
    if (!key.endsWith("/backup.json")) continue;
    const backupId = key.split("/")[2]!;
    expect(await store.exists(baseTarKey(id, backupId))).toBe(true);
    expect(await store.exists(manifestKey(id, backupId))).toBe(true);
  }
}

const walsenders = async (fx: Fixture) =>
  Number((await fx.sql("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'dbaas-backup'"))[0]!.n);

describe("base backups under failure (PostgreSQL 17)", { timeout: 120_000 }, () => {
  let fx: Fixture;
  let manager: BackupManager | undefined;

  beforeAll(async () => {
    fx = await startFixture("bkp", "17");
  }, 60_000);

  afterAll(async () => {
    await shutdown(manager, fx);
  }, 60_000);

  it("after a kill half-way, a restart clears the leftovers and retries the backup", async () => {
    // What a kill -9 during an attempt leaves: the attempt counted, the server's files in staging, a tar with no record.
    const staging = path.join(fx.dataDir, "backup-staging", fx.id, "bkp-crash");
    await mkdir(staging, { recursive: true });
    await writeFile(path.join(staging, "base.tar"), "half a tar");
    await mkdir(path.join(fx.dataDir, "backups", "attempts"), { recursive: true });
    await writeFile(
      path.join(fx.dataDir, "backups", "attempts", `${fx.id}.json`),
      JSON.stringify({ backupId: "bkp-crash", attempts: 1, lastError: "interrupted" }),
    );
    await fx.store.put(baseTarKey(fx.id, "bkp-crash"), Buffer.from("not a whole backup"));

    ({ manager } = managerFor(fx));
    await manager.start();
    expect(existsSync(staging)).toBe(false);
    manager.setDesired([{ ...fx.spec, backupIds: ["bkp-crash"] }]);
    const done = await waitFor(
      () => view(manager!, fx.id)?.backups.find((b) => b.backupId === "bkp-crash" && b.state !== BackupState.RUNNING),
      60_000,
      "outcome",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    expect(await fx.store.exists(recordKey(fx.id, "bkp-crash"))).toBe(true);
    expect(existsSync(path.join(fx.dataDir, "backups", "attempts", `${fx.id}.json`))).toBe(false);
    await assertNoRecordWithoutFiles(fx.store, fx.id);
  });

  it("an attempt cut off mid-way writes no record; the next one ends its walsender and completes", async () => {
    const stagingRoot = path.join(fx.dataDir, "backup-staging");
    const base = {
      store: fx.store,
      databaseId: fx.id,
      version: "17",
      connection: (await fx.runtime.agentConnection(fx.id))!,
      stagingRoot,
      server: await fx.runtime.serverFiles(fx.id),
      // The WAL is not waited for here: the manager's archiver is what stores it.
      waitForWal: async () => {},
      now: () => new Date(),
    };
    await fx.sql("CREATE TABLE IF NOT EXISTS big AS SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 100000) g");
    const abort = new AbortController();
    const attempt = takeBaseBackup({ ...base, backupId: "bkp-cut", signal: abort.signal });
    // Cut it off as soon as the server is writing the backup.
    await waitFor(async () => (await readdir(path.join(stagingRoot, fx.id)).catch(() => [])).length > 0, 20_000, "backup under way");
    abort.abort();
    await expect(attempt).rejects.toThrow();
    expect(await fx.store.exists(recordKey(fx.id, "bkp-cut"))).toBe(false);
    expect(existsSync(path.join(stagingRoot, fx.id))).toBe(false);

    const record = await takeBaseBackup({ ...base, backupId: "bkp-cut", signal: new AbortController().signal });
    expect(record.backupId).toBe("bkp-cut");
    expect(await fx.store.exists(recordKey(fx.id, "bkp-cut"))).toBe(true);
    await waitFor(async () => (await walsenders(fx)) === 0, 10_000, "no backup walsender left");
    await assertNoRecordWithoutFiles(fx.store, fx.id);
  });

  it("a backup ended by the instance's own restarts is retried without using up its attempts", async () => {
    // The spool replaced by a file: archiving fails, so each attempt's BASE_BACKUP waits for its WAL until a restart ends it.
    await rename(fx.spoolDir, `${fx.spoolDir}.away`);
    await writeFile(fx.spoolDir, "");
    const settings = { port: fx.port, tier: "micro", hostname: fx.spec.host, scramVerifier: fx.spec.scramVerifier };
    try {
      manager!.setDesired([{ ...fx.spec, backupIds: ["bkp-restarted"] }]);
      for (let i = 1; i <= BACKUP_ATTEMPTS; i++) {
        await waitFor(async () => (await walsenders(fx).catch(() => 0)) > 0, 30_000, `attempt ${i} under way`);
        await fx.runtime.restart(fx.id, settings);
      }
    } finally {
      await rm(fx.spoolDir);
      await rename(`${fx.spoolDir}.away`, fx.spoolDir);
    }
    // A reload wakes the server's archiver, which otherwise retries the failed files only after a minute.
    await fx.sql("SELECT pg_reload_conf()");
    const done = await waitFor(
      () => view(manager!, fx.id)?.backups.find((b) => b.backupId === "bkp-restarted" && b.state !== BackupState.RUNNING),
      60_000,
      "outcome",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    await assertNoRecordWithoutFiles(fx.store, fx.id);
  });

  it("three failed attempts are reported failed with the last reason, and not tried again after a restart", async () => {
    await rename(fx.storeDir, `${fx.storeDir}.away`);
    await writeFile(fx.storeDir, "");
    try {
      manager!.setDesired([{ ...fx.spec, backupIds: ["bkp-crash", "bkp-doomed"] }]);
      const failed = await waitFor(
        () => view(manager!, fx.id)?.backups.find((b) => b.backupId === "bkp-doomed" && b.state === BackupState.FAILED),
        60_000,
        "failed outcome",
      );
      expect(failed.message).toContain("ENOTDIR");
      const attempts = JSON.parse(await readFile(path.join(fx.dataDir, "backups", "attempts", `${fx.id}.json`), "utf8"));
      expect(attempts).toMatchObject({ backupId: "bkp-doomed", attempts: 3 });

      // A restarted agent reports the outcome again without a fourth attempt.
      await manager!.stop();
      ({ manager } = managerFor(fx));
      await manager.start();
      manager.setDesired([{ ...fx.spec, backupIds: ["bkp-doomed"] }]);
      const again = await waitFor(() => view(manager!, fx.id)?.backups.find((b) => b.backupId === "bkp-doomed"), 10_000, "report");
      expect(again.state).toBe(BackupState.FAILED);
      expect(again.message).toContain("ENOTDIR");
      expect(JSON.parse(await readFile(path.join(fx.dataDir, "backups", "attempts", `${fx.id}.json`), "utf8")).attempts).toBe(3);
    } finally {
      await rm(fx.storeDir);
      await rename(`${fx.storeDir}.away`, fx.storeDir);
    }
    expect(await fx.store.exists(recordKey(fx.id, "bkp-doomed"))).toBe(false);
    await assertNoRecordWithoutFiles(fx.store, fx.id);
  });
});
