/**
 * The blob store on a local (or mounted) filesystem: `file:///abs/dir`, keys
 * are paths under the root.
 *
 * A put writes `<name>~<random>.tmp` beside the target, fsyncs it, renames it
 * over the target and fsyncs the directory: a crash leaves the previous object
 * or the new one, and at worst a temp file. Temp names hold `~`, which no key
 * may, so `list` never returns one; `list` also removes those it meets that
 * are more than an hour old (a crash's leftovers — a put still writing keeps
 * its file's mtime fresh), so no separate sweep needs wiring.
 *
 * Deletes fsync the directory too, so "delete the record, then its files"
 * keeps its order across a crash. Unlike S3, a key cannot be both an object
 * and a "directory" of other keys here; layout.ts never needs that.
 */
import { randomBytes } from "node:crypto";
import { constants, createWriteStream } from "node:fs";
import { copyFile, type FileHandle, mkdir, open, readdir, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { assertValidKey, assertValidPrefix, type BlobInfo, BlobNotFoundError, type BlobStore } from "./blob-store.ts";

const TEMP_MARK = "~";
const STALE_TEMP_MS = 60 * 60 * 1000;

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException).code;
const isMissing = (err: unknown) => errno(err) === "ENOENT" || errno(err) === "ENOTDIR";
/** A `.catch` handler: `fallback` when the file or directory is not there, the error otherwise. */
const ignoreMissing =
  <T>(fallback: T) =>
  (err: unknown): T => {
    if (isMissing(err)) return fallback;
    throw err;
  };

async function fsyncPath(file: string): Promise<void> {
  const handle = await open(file, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function removeIfStale(file: string): Promise<void> {
  const info = await stat(file).catch(() => null);
  if (info && Date.now() - info.mtimeMs > STALE_TEMP_MS) await rm(file, { force: true, recursive: true });
}

export function createFileStore(rootDir: string): BlobStore {
  if (!path.isAbsolute(rootDir)) throw new Error(`the file backup store needs an absolute directory, got ${JSON.stringify(rootDir)}`);
  const root = path.resolve(rootDir);
  const description = `file://${root}`;
  const fileOf = (key: string) => {
    assertValidKey(key);
    return path.join(root, ...key.split("/"));
  };
  const failure = (op: string, key: string, err: unknown) =>
    new Error(`backup store ${description}: ${op} ${key} failed: ${(err as Error).message}`, { cause: err });

  async function writeTemp(temp: string, body: Readable | Buffer | { path: string }): Promise<void> {
    if (Buffer.isBuffer(body)) await writeFile(temp, body, { flag: "wx", mode: 0o600 });
    else if (body instanceof Readable) await pipeline(body, createWriteStream(temp, { flags: "wx", mode: 0o600 }));
    else await copyFile(body.path, temp, constants.COPYFILE_EXCL);
    await fsyncPath(temp);
  }

  /** Appends the objects under `dir` (whose key prefix is `dirKey`) that start with `want`. */
  async function walk(dir: string, dirKey: string, want: string, out: BlobInfo[]): Promise<void> {
    const entries = await readdir(dir, { withFileTypes: true }).catch(ignoreMissing([]));
    await Promise.all(
      entries.map(async (entry) => {
        const file = path.join(dir, entry.name);
        const key = dirKey + entry.name;
        if (entry.name.includes(TEMP_MARK)) return removeIfStale(file);
        if (entry.isDirectory()) {
          if (`${key}/`.startsWith(want) || want.startsWith(`${key}/`)) await walk(file, `${key}/`, want, out);
          return;
        }
        if (!entry.isFile() || !key.startsWith(want)) return;
        const info = await stat(file).catch(ignoreMissing(null)); // null: deleted while listing
        if (info) out.push({ key, size: info.size });
      }),
    );
  }

  async function list(prefix: string): Promise<BlobInfo[]> {
    assertValidPrefix(prefix);
    const dirKey = prefix.slice(0, prefix.lastIndexOf("/") + 1);
    const out: BlobInfo[] = [];
    try {
      await walk(path.join(root, ...dirKey.split("/")), dirKey, prefix, out);
    } catch (err) {
      throw failure("list", `${prefix}*`, err);
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async function remove(key: string): Promise<void> {
    const file = fileOf(key);
    try {
      await unlink(file);
      await fsyncPath(path.dirname(file));
    } catch (err) {
      if (isMissing(err) || errno(err) === "EISDIR") return;
      throw failure("delete", key, err);
    }
  }

  return {
    description,

    async put(key, body) {
      const target = fileOf(key);
      const dir = path.dirname(target);
      const temp = path.join(dir, `${path.basename(target)}${TEMP_MARK}${randomBytes(6).toString("hex")}.tmp`);
      try {
        await mkdir(dir, { recursive: true, mode: 0o700 });
        await writeTemp(temp, body);
        await rename(temp, target);
        await fsyncPath(dir);
      } catch (err) {
        await rm(temp, { force: true }).catch(() => {}); // ENOTDIR when the directory could not be made
        throw failure("put", key, err);
      }
    },

    async get(key) {
      const file = fileOf(key);
      let handle: FileHandle;
      try {
        handle = await open(file, "r");
      } catch (err) {
        if (isMissing(err)) throw new BlobNotFoundError(key);
        throw failure("get", key, err);
      }
      if (!(await handle.stat()).isFile()) {
        await handle.close();
        throw new BlobNotFoundError(key);
      }
      return handle.createReadStream();
    },

    async exists(key) {
      const file = fileOf(key);
      try {
        return (await stat(file)).isFile();
      } catch (err) {
        if (isMissing(err)) return false;
        throw failure("stat", key, err);
      }
    },

    list,
    delete: remove,

    async deletePrefix(prefix) {
      assertValidPrefix(prefix);
      if (prefix !== "" && !prefix.endsWith("/")) {
        for (const { key } of await list(prefix)) await remove(key);
        return;
      }
      // A whole subtree (temp files included) at once; "" empties the root but keeps it.
      const dir = path.join(root, ...prefix.split("/"));
      try {
        const doomed = prefix === "" ? (await readdir(root).catch(ignoreMissing([]))).map((name) => path.join(root, name)) : [dir];
        await Promise.all(doomed.map((file) => rm(file, { recursive: true, force: true })));
        await fsyncPath(path.dirname(doomed[0] ?? root)).catch(ignoreMissing(undefined));
      } catch (err) {
        throw failure("delete", `${prefix}*`, err);
      }
    },
  };
}
