import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { ConfigError, createLogger } from "@dbaas/kit";
import { afterEach, describe, expect, it } from "vitest";
import { createArchiver } from "../../src/backups/archiver.ts";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { walKey } from "../../src/backups/layout.ts";
import { readConfig } from "../../src/config.ts";
import { tempDataDir } from "../instances/helpers.ts";
import { waitFor } from "./support.ts";

// The uploader's bookkeeping under concurrency: every spool gets its turn,
// and what it knows is stored is not lost to a listing that overlapped an upload.

const SEG = "000000010000000000000001";

describe("the WAL uploader", { timeout: 60_000 }, () => {
  let root: string | undefined;
  let stop: (() => Promise<void>) | undefined;

  afterEach(async () => {
    await stop?.();
    if (root) await rm(root, { recursive: true, force: true });
  });

  // It used to start the first idle spools in listing order on every scan, so
  // with more spools than it drains at once the same ones were drained over
  // and over and the rest never were.
  it("drains every spool, not only the first ones listed", async () => {
    root = await tempDataDir("fair");
    const spoolRoot = path.join(root, "wal-spool");
    const store = createFileStore(path.join(root, "store"));
    const ids = Array.from({ length: 6 }, (_, i) => `db-fair${i}`);
    for (const id of ids) {
      await mkdir(path.join(spoolRoot, id), { recursive: true, mode: 0o700 });
      await writeFile(path.join(spoolRoot, id, SEG), `wal of ${id}`);
    }
    const archiver = createArchiver({ spoolRoot, store, log: createLogger("archiver-test"), maxSpoolBytes: 1024 ** 3, intervalMs: 20 });
    archiver.start();
    stop = () => archiver.stop(1000);
    const stored = async () => (await Promise.all(ids.map((id) => store.exists(walKey(id, SEG))))).every(Boolean);
    await waitFor(stored, 10_000, "every spool's WAL in the store").catch(() => undefined);
    const missing = [];
    for (const id of ids) if (!(await store.exists(walKey(id, SEG)))) missing.push(id);
    expect(missing).toEqual([]);
  });

  // The first listing of a database's stored WAL (a base backup or the
  // window asking) answered after an upload it overlapped used to replace
  // what the upload had added: a backup then waited for that segment in vain.
  it("keeps a segment stored while an earlier listing was in flight", async () => {
    root = await tempDataDir("list");
    const spoolRoot = path.join(root, "wal-spool");
    const store = createFileStore(path.join(root, "store"));
    const id = "db-list";
    await mkdir(path.join(spoolRoot, id), { recursive: true, mode: 0o700 });
    await writeFile(path.join(spoolRoot, id, SEG), "wal");
    // The real store, with its first listing answered late (a slow S3 LIST).
    let release = () => {};
    const late = new Promise<void>((r) => (release = r));
    let first = true;
    const slowFirstList: BlobStore = {
      ...store,
      async list(prefix) {
        const keys = await store.list(prefix);
        if (first) {
          first = false;
          await late;
        }
        return keys;
      },
    };
    const archiver = createArchiver({
      spoolRoot,
      store: slowFirstList,
      log: createLogger("archiver-test"),
      maxSpoolBytes: 1024 ** 3,
      intervalMs: 20,
    });
    const early = archiver.stored(id);
    archiver.start();
    stop = () => archiver.stop(1000);
    // Let the uploader store the segment if it does not wait for that listing.
    await waitFor(() => store.exists(walKey(id, SEG)), 2000, "upload").catch(() => undefined);
    release();
    await early;
    // The listing has answered: had it replaced the set the upload added to, segment 1 would be gone for good.
    // Polled, because the uploader adds it to the set only after deleting the spool copy, a moment after the
    // store has it.
    await waitFor(async () => (await archiver.stored(id)).has(1), 10_000, "segment 1 known as stored");
    expect([...(await archiver.stored(id))]).toEqual([1]);
  });

  // A store that keeps failing is retried 1 s, 2 s, 4 s… apart, never more than maxBackoffMs
  // (BACKUP_UPLOAD_RETRY_MAX_MS); the failure shows in the status until a put succeeds.
  it("retries a failing store at most maxBackoffMs apart, and clears the error once a put succeeds", async () => {
    root = await tempDataDir("backoff");
    const spoolRoot = path.join(root, "wal-spool");
    const store = createFileStore(path.join(root, "store"));
    const id = "db-backoff";
    await mkdir(path.join(spoolRoot, id), { recursive: true, mode: 0o700 });
    await writeFile(path.join(spoolRoot, id, SEG), "wal");
    // Six failed puts: uncapped, 1 + 2 + 4 + 8 + 16 + 30 s of waiting before the seventh.
    let failures = 0;
    const failing: BlobStore = {
      ...store,
      async put(key, body) {
        if (failures < 6) {
          failures++;
          throw new Error("store unreachable");
        }
        await store.put(key, body);
      },
    };
    const archiver = createArchiver({
      spoolRoot,
      store: failing,
      log: createLogger("archiver-test"),
      maxSpoolBytes: 1024 ** 3,
      intervalMs: 20,
      maxBackoffMs: 50,
    });
    archiver.start();
    stop = () => archiver.stop(1000);
    await waitFor(() => archiver.status(id).archiveError.includes("store unreachable"), 5000, "the failure reported");
    await waitFor(() => store.exists(walKey(id, SEG)), 20_000, "the segment stored after six failed puts");
    expect(failures).toBe(6);
    await waitFor(() => archiver.status(id).archiveError === "", 5000, "the error cleared");
  });
});

describe("BACKUP_UPLOAD_RETRY_MAX_MS and BACKUP_S3_IDLE_TIMEOUT_MS", () => {
  const REQUIRED = {
    DATABASES_URL: "http://127.0.0.1:1",
    INTERNAL_AUTH_SECRET: "s",
    AGENT_REPLICATION_SECRET: "r",
    BACKUP_ENCRYPTION_KEY: "ZGJhYXMtYmFja3VwLXRlc3QtbWFzdGVyLWtleS0zMmI=",
  };

  it("the upload retry cap is 30 s unless set, and must be positive", () => {
    expect(readConfig(REQUIRED).backup.uploadRetryMaxMs).toBe(30_000);
    expect(readConfig({ ...REQUIRED, BACKUP_UPLOAD_RETRY_MAX_MS: "2000" }).backup.uploadRetryMaxMs).toBe(2000);
    expect(() => readConfig({ ...REQUIRED, BACKUP_UPLOAD_RETRY_MAX_MS: "0" })).toThrow(ConfigError);
  });

  it("the S3 idle timeout reaches the store's settings", () => {
    expect(readConfig({ ...REQUIRED, BACKUP_S3_IDLE_TIMEOUT_MS: "5000" }).backupStoreEnv.BACKUP_S3_IDLE_TIMEOUT_MS).toBe("5000");
  });
});
