import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { BackupState, type DatabaseBackups, DesiredState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { type BackupRecord, baseTarKey, manifestKey, recordKey, walKey } from "../../src/backups/layout.ts";
import { WAL_SEGMENT_BYTES } from "../../src/backups/wal.ts";
import { type Fixture, managerFor, shutdown, startFixture, view, waitFor, writeAndSwitch } from "./support.ts";

// WAL archiving, a base backup and the restore window on real instances, as
// the agent runs them: basic_archive into the spool, the uploader into a file
// store, BASE_BACKUP on a replication connection.

async function readObject(fx: Fixture, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await fx.store.get(key)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe.each(["17", "16"])("archiving and base backups (PostgreSQL %s)", { timeout: 120_000 }, (major) => {
  let fx: Fixture;
  let manager: BackupManager;
  let reports: DatabaseBackups[][];

  beforeAll(async () => {
    fx = await startFixture(`arc${major}`, major);
    ({ manager, reports } = managerFor(fx));
    await manager.start();
    manager.setDesired([{ ...fx.spec, backupIds: ["bkp-first"] }]);
  }, 60_000);

  afterAll(async () => {
    await shutdown(manager, fx);
  }, 60_000);

  it("uploads a finished segment gzip'd and removes it from the spool", async () => {
    const seg = await writeAndSwitch(fx);
    const key = walKey(fx.id, seg);
    await waitFor(() => fx.store.exists(key), 20_000, `${key} in the store`);
    const segment = gunzipSync(await readObject(fx, key));
    expect(segment.length).toBe(WAL_SEGMENT_BYTES);
    await waitFor(async () => !(await readdir(fx.spoolDir)).includes(seg), 5000, "spool copy removed");
    expect(view(manager, fx.id)?.archiveError).toBe("");
  });

  it("takes the requested base backup: files first, the record last, with its WAL stored", async () => {
    const done = await waitFor(
      () => view(manager, fx.id)?.backups.find((b) => b.backupId === "bkp-first" && b.state !== BackupState.RUNNING),
      60_000,
      "backup outcome",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    expect(done.sizeBytes).toBeGreaterThan(0n);
    // The first report that says so already carries the window it opens.
    const first = reports.flat().find((d) => d.backups.some((b) => b.backupId === "bkp-first" && b.state === BackupState.COMPLETED));
    expect(first?.earliestRestoreTime).toBeDefined();
    const record = JSON.parse((await readObject(fx, recordKey(fx.id, "bkp-first"))).toString()) as BackupRecord;
    expect(record).toMatchObject({ backupId: "bkp-first", databaseId: fx.id, version: major, timeline: 1 });
    expect(record.startLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect(record.stopLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect(Date.parse(record.stoppedAt)).toBeGreaterThanOrEqual(Date.parse(record.startedAt));
    expect(await fx.store.exists(baseTarKey(fx.id, "bkp-first"))).toBe(true);
    expect(await fx.store.exists(manifestKey(fx.id, "bkp-first"))).toBe(true);
    // The tar is a real ustar archive of the data directory.
    const tar = gunzipSync(await readObject(fx, baseTarKey(fx.id, "bkp-first")));
    expect(tar.subarray(257, 262).toString()).toBe("ustar");
    expect(tar.toString("latin1")).toContain("PG_VERSION");
    // Nothing of the backup stays beside the instance.
    expect(existsSync(path.join(fx.dataDir, "backup-staging", fx.id))).toBe(false);
  });

  it("reports the window: from the backup's end to about now when idle", async () => {
    const record = JSON.parse((await readObject(fx, recordKey(fx.id, "bkp-first"))).toString()) as BackupRecord;
    // Idle: the archive timeout switches away from the last written segment; then every sample is restorable.
    const d = await waitFor(
      () => {
        const v = view(manager, fx.id);
        return v?.latestRestoreTime && Date.now() - timestampDate(v.latestRestoreTime).getTime() < 10_000 ? v : undefined;
      },
      60_000,
      "latest restore time near now",
    );
    expect(timestampDate(d.earliestRestoreTime!).toISOString()).toBe(record.stoppedAt);
    expect(d.spoolBytes).toBe(0n);
  });

  it("a deleted database keeps its backups and window through retention; a purge removes them and its spool", async () => {
    // As the reconciler does it: the database was deleted (stopped, its last WAL archived), later purged.
    await fx.m.stop(fx.id);
    const before = (await fx.store.list(`${fx.id}/`)).map((b) => b.key);
    const reported = reports.length;
    manager.setDesired([{ ...fx.spec, desiredState: DesiredState.DELETED }]);
    // A few of the manager's rounds (every 300 ms here) with the database deleted: still reported, nothing removed.
    await waitFor(() => reports.length >= reported + 3, 10_000, "three more reports");
    expect(view(manager, fx.id)?.earliestRestoreTime).toBeDefined();
    expect((await fx.store.list(`${fx.id}/`)).map((b) => b.key)).toEqual(expect.arrayContaining(before));
    manager.setDesired([{ ...fx.spec, desiredState: DesiredState.PURGED }]);
    await manager.purge(fx.id);
    expect(await fx.store.list(`${fx.id}/`)).toEqual([]);
    expect(existsSync(fx.spoolDir)).toBe(false);
    expect(view(manager, fx.id)).toBeUndefined();
  });
});
