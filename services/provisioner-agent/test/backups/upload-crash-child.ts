/**
 * The WAL uploader of an agent about to be killed, for upload-crash.test.ts:
 * `node --import tsx upload-crash-child.ts <spoolRoot> <storeDir>`. It
 * uploads into the real file store, but every WAL put sends half its bytes
 * and then waits forever, so a kill -9 lands while a put is half-written
 * (the store's temp file holds part of the object).
 */
import { Readable } from "node:stream";
import { createLogger } from "@dbaas/kit";
import { createArchiver } from "../../src/backups/archiver.ts";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { createFileStore } from "../../src/backups/file-store.ts";

const [spoolRoot, storeDir] = process.argv.slice(2);
if (!spoolRoot || !storeDir) throw new Error("usage: upload-crash-child.ts <spoolRoot> <storeDir>");
const store = createFileStore(storeDir);

const stalling: BlobStore = {
  ...store,
  async put(key, body) {
    if (!Buffer.isBuffer(body)) throw new Error("the uploader puts WAL as a Buffer");
    const half = body.subarray(0, Math.ceil(body.length / 2));
    const stream = new Readable({ read() {} });
    // The put's temp file is written up to here; the rest never comes.
    stream.push(half);
    await store.put(key, stream);
  },
};

createArchiver({ spoolRoot, store: stalling, log: createLogger("upload-crash-child"), maxSpoolBytes: 1024 ** 3, intervalMs: 20 }).start();
