import { readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { walKey } from "../../src/backups/layout.ts";
import { WAL_SEGMENT_BYTES } from "../../src/backups/wal.ts";
import { walArchiveLagSeconds } from "../../src/samples/measure.ts";
import { type Fixture, managerFor, shutdown, startFixture, view, waitFor, writeAndSwitch } from "./support.ts";

// The backup store goes away: archiving must say why, the spool must stop at
// its bound (the server keeps its WAL and retries), no spool file may go
// before it is stored, and everything drains once the store is back.

const BOUND = 3 * WAL_SEGMENT_BYTES;

async function spoolBytes(dir: string): Promise<number> {
  let sum = 0;
  for (const name of await readdir(dir)) sum += (await stat(path.join(dir, name))).size;
  return sum;
}

describe("an unreachable backup store", { timeout: 120_000 }, () => {
  let fx: Fixture;
  let manager: BackupManager;
  const segments: string[] = [];

  beforeAll(async () => {
    fx = await startFixture("bound", "17");
    ({ manager } = managerFor(fx, { settings: { maxSpoolBytes: BOUND } }));
    await manager.start();
    manager.setDesired([fx.spec]);
  }, 60_000);

  afterAll(async () => {
    await shutdown(manager, fx);
  }, 60_000);

  it("sets archive_error and stops the spool at its bound", async () => {
    // The real file store, made unusable: its root is now a plain file (every put fails with ENOTDIR, even for root).
    await rename(fx.storeDir, `${fx.storeDir}.away`);
    await writeFile(fx.storeDir, "");
    for (let i = 0; i < 6; i++) {
      segments.push(await writeAndSwitch(fx, 100));
      await new Promise((r) => setTimeout(r, 300));
    }
    const status = await waitFor(
      () => {
        const v = view(manager, fx.id);
        return v?.archiveError.includes("WAL spool full") ? v : undefined;
      },
      20_000,
      "spool full reported",
    );
    expect(status.archiveError).toMatch(/WAL upload to the backup store .* failed: .*ENOTDIR/);
    expect(status.archiveError).toContain("WAL spool full (48 MiB)");
    const held = await spoolBytes(fx.spoolDir);
    expect(held).toBeLessThanOrEqual(BOUND);
    // More WAL does not grow the spool: the server keeps it and counts failures.
    for (let i = 0; i < 2; i++) segments.push(await writeAndSwitch(fx, 100));
    await new Promise((r) => setTimeout(r, 1500));
    expect(await spoolBytes(fx.spoolDir)).toBeLessThanOrEqual(BOUND);
    const archiver = (await fx.sql("SELECT failed_count FROM pg_stat_archiver"))[0]!;
    expect(Number(archiver.failed_count)).toBeGreaterThan(0);
    expect(view(manager, fx.id)?.spoolBytes).toBe(BigInt(held));
    // And on the database's metrics: wal_archive_lag_seconds, the age of the oldest WAL file waiting (0 when none is).
    const since = (await stat(path.join(fx.spoolDir, segments[0]!))).mtimeMs;
    const lag = await walArchiveLagSeconds(fx.spoolDir, new Date(Math.ceil(since) + 42_000));
    expect(lag).toBeGreaterThanOrEqual(42);
  });

  it("drains once the store is back, losing no segment", async () => {
    await rm(fx.storeDir);
    await rename(`${fx.storeDir}.away`, fx.storeDir);
    for (const seg of segments) await waitFor(() => fx.store.exists(walKey(fx.id, seg)), 30_000, `${seg} stored`);
    await waitFor(async () => (await readdir(fx.spoolDir)).length === 0, 10_000, "spool empty");
    await waitFor(() => view(manager, fx.id)?.archiveError === "", 10_000, "archive_error cleared");
    expect(await walArchiveLagSeconds(fx.spoolDir, new Date())).toBe(0);
    // Every segment from the first one on is stored: none was deleted unstored.
    const stored = (await fx.store.list(`${fx.id}/wal/`)).map((o) => o.key.slice(-27, -3)).filter((n) => /^[0-9A-F]{24}$/.test(n));
    const numbers = stored.map((n) => Number.parseInt(n.slice(16), 16)).sort((a, b) => a - b);
    expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, i) => numbers[0]! + i));
    expect(numbers.length).toBeGreaterThanOrEqual(segments.length);
  });
});
