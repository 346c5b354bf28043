import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { createLogger } from "@dbaas/kit";
import { BackupState, type DatabaseBackups, DesiredState, InstanceSpecSchema } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BackupManager, createBackupManager } from "../../src/backups/backup-manager.ts";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { type BackupRecord, baseTarKey, manifestKey, recordKey, walKey } from "../../src/backups/layout.ts";
import { planRetention } from "../../src/backups/retention.ts";
import { createInstanceManager } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { tempDataDir } from "../instances/helpers.ts";
import { type Fixture, managerFor, shutdown, startFixture, TEST_SETTINGS, view, waitFor } from "./support.ts";

// Retention keeps every backup of the last 7 days plus the newest before them
// (a restore to the window's first instant starts there), and the WAL from the
// oldest kept backup's start on; everything else goes, record first.

const DAY = 86_400_000;
const NOW = Date.parse("2026-06-15T12:00:00Z");

/** A completed backup that stopped `daysAgo` before NOW and starts in WAL segment `segno`. */
function backup(id: string, daysAgo: number, segno: number): BackupRecord {
  const at = new Date(NOW - daysAgo * DAY);
  const lsn = `${(segno >> 8).toString(16).toUpperCase()}/${((segno & 0xff) * 0x1000000 + 0x28).toString(16).toUpperCase()}`;
  return {
    backupId: id,
    databaseId: "db-ret",
    version: "17",
    startLsn: lsn,
    stopLsn: lsn,
    timeline: 1,
    startedAt: at.toISOString(),
    stoppedAt: at.toISOString(),
    sizeBytes: 10,
  };
}

const segName = (segno: number) =>
  `00000001${(segno >> 8).toString(16).toUpperCase().padStart(8, "0")}${(segno & 0xff).toString(16).toUpperCase().padStart(8, "0")}`;
const ids = (list: BackupRecord[]) => list.map((b) => b.backupId).sort();

describe("planRetention", () => {
  it("keeps everything, and no WAL is pruned, while nothing has completed", () => {
    expect(planRetention([], new Date(NOW), 7)).toEqual({ keep: [], prune: [], walBefore: undefined });
  });

  it("keeps every backup of the window and prunes only WAL older than the oldest", () => {
    const plan = planRetention([backup("a", 1, 30), backup("b", 6, 20)], new Date(NOW), 7);
    expect(ids(plan.keep)).toEqual(["a", "b"]);
    expect(plan.prune).toEqual([]);
    expect(plan.walBefore).toBe(20);
  });

  it("keeps the newest backup older than the window, which covers its first instant, and prunes the older ones", () => {
    const plan = planRetention(
      [backup("new", 2, 50), backup("edge", 8, 40), backup("old", 9, 30), backup("older", 30, 10)],
      new Date(NOW),
      7,
    );
    expect(ids(plan.keep)).toEqual(["edge", "new"]);
    expect(ids(plan.prune)).toEqual(["old", "older"]);
    expect(plan.walBefore).toBe(40);
  });

  it("keeps only the newest when every backup is older than the window", () => {
    const plan = planRetention([backup("x", 20, 5), backup("y", 10, 9)], new Date(NOW), 7);
    expect(ids(plan.keep)).toEqual(["y"]);
    expect(ids(plan.prune)).toEqual(["x"]);
    expect(plan.walBefore).toBe(9);
  });

  it("counts a backup that stopped exactly at the window's start as inside it", () => {
    const plan = planRetention([backup("start", 7, 12), backup("before", 7.5, 11), backup("gone", 8, 10)], new Date(NOW), 7);
    expect(ids(plan.keep)).toEqual(["before", "start"]);
    expect(ids(plan.prune)).toEqual(["gone"]);
  });
});

describe("pruning in the store, on the manager's schedule", { timeout: 60_000 }, () => {
  let dir: string;
  let store: BlobStore;
  let manager: BackupManager;
  let now = NOW;
  const reports: DatabaseBackups[][] = [];
  const id = "db-ret";

  async function seed(b: BackupRecord): Promise<void> {
    await store.put(baseTarKey(id, b.backupId), Buffer.from("tar"));
    await store.put(manifestKey(id, b.backupId), Buffer.from("manifest"));
    await store.put(recordKey(id, b.backupId), Buffer.from(JSON.stringify(b)));
  }

  beforeAll(async () => {
    dir = await tempDataDir("retention");
    store = createFileStore(path.join(dir, "store"));
    await mkdir(path.join(dir, "agent"));
    for (const b of [backup("bkp-old", 12, 10), backup("bkp-mid", 9, 20), backup("bkp-new", 3, 30)]) await seed(b);
    for (let s = 8; s <= 35; s++) await store.put(walKey(id, segName(s)), Buffer.from("wal"));
    await store.put(walKey(id, "00000002.history"), Buffer.from("history"));
    const m = createInstanceManager({ dataDir: path.join(dir, "agent"), agentId: "test-retention" });
    manager = createBackupManager({
      store,
      runtime: createLocalProcessRuntime(m),
      dataDir: path.join(dir, "agent"),
      log: createLogger("retention-test"),
      clock: { now: () => new Date(now) },
      settings: { ...TEST_SETTINGS, pruneIntervalMs: 200 },
      notify: () => reports.push(manager.snapshot()),
      tickMs: 100,
    });
    // A stopped database: nothing to sample or back up, but its backups age all the same.
    manager.setDesired([create(InstanceSpecSchema, { databaseId: id, version: "17", desiredState: DesiredState.STOPPED, port: 1 })]);
    await manager.start();
  });

  afterAll(async () => {
    await manager?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  /** Backups reported pruned (each is repeated until delivered; here nothing is). */
  const pruned = () => [
    ...new Set(reports.flat().flatMap((d) => d.backups.filter((b) => b.state === BackupState.PRUNED).map((b) => b.backupId))),
  ];
  const walLeft = async () => (await store.list(`${id}/wal/`)).map((o) => o.key.slice(`${id}/wal/`.length));

  it("prunes a backup once it is neither in the window nor the newest before it, record first, with the WAL only it needed", async () => {
    await waitFor(() => pruned().includes("bkp-old"), 5000, "bkp-old pruned");
    for (const key of [recordKey(id, "bkp-old"), baseTarKey(id, "bkp-old"), manifestKey(id, "bkp-old")]) {
      expect(await store.exists(key)).toBe(false);
    }
    expect(await store.exists(recordKey(id, "bkp-mid"))).toBe(true);
    const wal = await walLeft();
    expect(wal).toContain("00000002.history.gz");
    expect(wal).toContain(`${segName(20)}.gz`);
    expect(wal).not.toContain(`${segName(19)}.gz`);
    expect(pruned()).toEqual(["bkp-old"]);
  });

  it("moves on as the clock does, never touching what the newest backup needs", async () => {
    now = NOW + 5 * DAY; // bkp-new is now 8 days old: the newest before the window, so bkp-mid goes
    await waitFor(() => pruned().includes("bkp-mid"), 5000, "bkp-mid pruned");
    expect(await store.exists(recordKey(id, "bkp-new"))).toBe(true);
    const wal = await walLeft();
    expect(wal).toContain(`${segName(30)}.gz`);
    expect(wal).toContain(`${segName(35)}.gz`);
    expect(wal).not.toContain(`${segName(29)}.gz`);
    // Never sampled (stopped), the database is known restorable up to its last backup's end, now 8 days back:
    // the kept backup is what still offers that instant.
    const w = reports.at(-1)!.find((d) => d.databaseId === id)!;
    expect(timestampDate(w.latestRestoreTime!).getTime()).toBe(NOW - 3 * DAY);
    expect(timestampDate(w.earliestRestoreTime!).getTime()).toBe(NOW - 3 * DAY);
    now = NOW + 100 * DAY;
    await new Promise((r) => setTimeout(r, 600));
    expect(await store.exists(recordKey(id, "bkp-new"))).toBe(true);
    expect(pruned().sort()).toEqual(["bkp-mid", "bkp-old"]);
  });
});

// A backup that completes while a pruning pass is under way (its deletes are slow, as S3's can be) must stay
// known to retention: the pass used to replace the agent's list of completed backups with the one it had
// planned from, and the new backup was then never pruned (its files kept forever) until the agent restarted.
describe("a backup completed during a pruning pass", { timeout: 120_000 }, () => {
  let fx: Fixture;
  let manager: BackupManager;
  let offset = 0;
  let release = () => {};

  beforeAll(async () => {
    fx = await startFixture("retrace", "17");
  }, 60_000);

  afterAll(async () => {
    release();
    await shutdown(manager, fx);
  }, 60_000);

  it("is pruned in its turn once it is old", async () => {
    const aged = (id: string, daysAgo: number): BackupRecord => {
      const at = new Date(Date.now() - daysAgo * DAY).toISOString();
      return { ...backup(id, 0, 1), databaseId: fx.id, startedAt: at, stoppedAt: at };
    };
    // Two backups older than the window: the older goes at once, the newer is kept (it covers the window's start).
    for (const b of [aged("bkp-older", 40), aged("bkp-old", 30)]) {
      await fx.store.put(baseTarKey(fx.id, b.backupId), Buffer.from("tar"));
      await fx.store.put(recordKey(fx.id, b.backupId), Buffer.from(JSON.stringify(b)));
    }
    const held = new Promise<void>((r) => (release = r));
    const slowDeletes: BlobStore = {
      ...fx.store,
      async delete(key) {
        if (key === recordKey(fx.id, "bkp-older")) await held;
        await fx.store.delete(key);
      },
    };
    ({ manager } = managerFor(fx, {
      store: slowDeletes,
      clock: { now: () => new Date(Date.now() + offset) },
      settings: { pruneIntervalMs: 200 },
    }));
    await manager.start();
    manager.setDesired([{ ...fx.spec, backupIds: ["bkp-new"] }]);
    const done = await waitFor(
      () => view(manager, fx.id)?.backups.find((b) => b.backupId === "bkp-new" && b.state !== BackupState.RUNNING),
      60_000,
      "bkp-new",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    // The pass that began before bkp-new completed ends now.
    release();
    await waitFor(async () => !(await fx.store.exists(recordKey(fx.id, "bkp-older"))), 10_000, "bkp-older pruned");
    // Eight days on, bkp-new is the newest backup before the window: bkp-old goes.
    offset = 8 * DAY;
    await waitFor(async () => !(await fx.store.exists(recordKey(fx.id, "bkp-old"))), 10_000, "bkp-old pruned");
    expect(await fx.store.exists(recordKey(fx.id, "bkp-new"))).toBe(true);
  });
});
