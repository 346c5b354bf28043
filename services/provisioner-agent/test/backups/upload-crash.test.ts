import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { createLogger } from "@dbaas/kit";
import { afterEach, describe, expect, it } from "vitest";
import { createArchiver } from "../../src/backups/archiver.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { walKey } from "../../src/backups/layout.ts";
import { tempDataDir } from "../instances/helpers.ts";
import { waitFor } from "./support.ts";

// kill -9 of the agent during a WAL upload: the uploader runs in a child
// process (upload-crash-child.ts) whose put into the real file store is cut
// off half-way, and the child is SIGKILLed there. No segment may have left
// the spool, nothing half-written may be listed, nothing after it may have
// been uploaded first; the next uploader (the restarted agent) stores both whole.

const here = path.dirname(fileURLToPath(import.meta.url));
const SEG1 = "000000010000000000000007";
const SEG2 = "000000010000000000000008";

describe("kill -9 of the agent during a WAL upload", { timeout: 60_000 }, () => {
  let root: string | undefined;
  let child: ChildProcess | undefined;
  let stop: (() => Promise<void>) | undefined;

  afterEach(async () => {
    child?.kill("SIGKILL");
    await stop?.();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("leaves the segment in the spool and nothing listed; the restarted uploader stores it whole, in order", async () => {
    root = await tempDataDir("upcrash");
    const id = "db-upcrash";
    const spool = path.join(root, "wal-spool", id);
    const storeDir = path.join(root, "store");
    await mkdir(spool, { recursive: true, mode: 0o700 });
    // Random bytes: gzip leaves them as large, so half a put is a real part of the object.
    const bodies = new Map([SEG1, SEG2].map((name) => [name, randomBytes(256 * 1024)]));
    for (const [name, body] of bodies) await writeFile(path.join(spool, name), body);

    child = spawn(process.execPath, ["--import", "tsx", path.join(here, "upload-crash-child.ts"), path.join(root, "wal-spool"), storeDir], {
      stdio: ["ignore", "inherit", "inherit"],
    });
    const walDir = path.join(storeDir, id, "wal");
    // The first segment's put has begun writing its temp file.
    const temp = await waitFor(
      async () => {
        for (const name of await readdir(walDir).catch(() => [] as string[])) {
          if (name.startsWith(`${SEG1}.gz~`) && (await stat(path.join(walDir, name))).size > 0) return name;
        }
        return undefined;
      },
      30_000,
      "a half-written put",
    );
    child.kill("SIGKILL");
    await new Promise((r) => child!.once("exit", r));

    const store = createFileStore(storeDir);
    expect(await store.list(`${id}/`)).toEqual([]);
    expect(await store.exists(walKey(id, SEG1))).toBe(false);
    expect((await readdir(spool)).sort()).toEqual([SEG1, SEG2]);
    expect((await readdir(walDir)).includes(temp)).toBe(true);

    // The agent, restarted.
    const archiver = createArchiver({
      spoolRoot: path.join(root, "wal-spool"),
      store,
      log: createLogger("upload-crash-test"),
      maxSpoolBytes: 1024 ** 3,
      intervalMs: 20,
    });
    archiver.start();
    stop = () => archiver.stop(1000);
    await waitFor(async () => (await readdir(spool)).length === 0, 20_000, "the spool drained");
    // The uploader notes a segment as stored just after deleting its spool copy.
    await waitFor(async () => (await archiver.stored(id)).size === 2, 5_000, "both segments known as stored");
    for (const [name, body] of bodies) {
      const chunks: Buffer[] = [];
      for await (const c of await store.get(walKey(id, name))) chunks.push(c as Buffer);
      expect(gunzipSync(Buffer.concat(chunks)).equals(body)).toBe(true);
    }
    expect([...(await archiver.stored(id))].sort()).toEqual([7, 8]);
    expect((await store.list(`${id}/`)).map((b) => b.key)).toEqual([walKey(id, SEG1), walKey(id, SEG2)]);
  });
});
