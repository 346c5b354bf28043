import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { type FileHandle, lstat, mkdir, open, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { rand } from "./temp-name.ts";

/**
 * File operations of the agent (root) inside the directories of a server's
 * user. The agent runs as root; a server's directories (data directory, WAL spool,
 * socket directory, server logs, pooler and replication files) are its
 * tenant uid's, which may run code (docs/product.md, "Tenant isolation on an agent
 * host"): anything in them may be swapped for a symbolic link at any moment.
 * So nothing here follows a link there: new files are created O_EXCL|O_NOFOLLOW
 * and given their owner and mode on the open descriptor (fchown/fchmod), then
 * renamed into place (a rename replaces a link, never follows it); existing
 * files and directories are opened O_NOFOLLOW and changed on the descriptor;
 * trees are removed by GNU rm (which descends with openat/O_NOFOLLOW), never
 * by fs.rm's path walk. A link where a file or directory is expected is
 * refused with an {@link UnsafePathError}.
 */

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_APPEND, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;

/** Whom a file is for: a server's user (`switchUser`: the agent is root and gives it away), or the agent itself. */
export interface FileOwner {
  uid: number;
  gid: number;
  switchUser: boolean;
}

/** A path inside a tenant's directory that is not what the agent expects there (a symbolic link, a FIFO, someone else's file). */
export class UnsafePathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsafePathError";
  }
}

/** Opens `p` without following a final symbolic link (refused as an {@link UnsafePathError}). */
export async function openNoFollow(p: string, flags: number, what: string, mode?: number): Promise<FileHandle> {
  try {
    return await open(p, flags | O_NOFOLLOW, mode);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new UnsafePathError(`refusing ${what} ${p}: it is a symbolic link (planted by the server's user?)`);
    if (code === "ENOTDIR" && flags & O_DIRECTORY) {
      // O_DIRECTORY|O_NOFOLLOW on a link to a directory says ENOTDIR: name what it is.
      const link = await lstat(p).then(
        (st) => st.isSymbolicLink(),
        () => false,
      );
      throw new UnsafePathError(
        `refusing ${what} ${p}: it is ${link ? "a symbolic link (planted by the server's user?)" : "not a directory"}`,
      );
    }
    throw e;
  }
}

/**
 * The end of a log file, for error messages; empty when it cannot be read.
 * A link or anything but a regular file is not read (error messages travel to
 * the control plane: a server's user must not get another file's end into them).
 */
export async function tail(file: string, chars = 2000): Promise<string> {
  try {
    const fh = await open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    try {
      const st = await fh.stat();
      if (!st.isFile()) return "";
      const start = Math.max(0, st.size - chars * 4);
      const buf = Buffer.alloc(st.size - start);
      const { bytesRead } = await fh.read(buf, 0, buf.length, start);
      return buf.subarray(0, bytesRead).toString("utf8").slice(-chars).trim();
    } finally {
      await fh.close();
    }
  } catch {
    return "";
  }
}

/**
 * A text file the server's user owns (its postgresql.conf, say), read without
 * following a link and only if it is a regular file owned by `owner` (or by the
 * agent): never another file planted or hard-linked in its place. Without
 * `owner`, any regular file (not a link).
 */
export async function readOwned(owner: FileOwner | undefined, file: string): Promise<string> {
  const fh = await openNoFollow(file, O_RDONLY | O_NONBLOCK, "to read");
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new UnsafePathError(`refusing to read ${file}: not a regular file`);
    if (owner?.switchUser && st.uid !== owner.uid && st.uid !== process.getuid?.())
      throw new UnsafePathError(`refusing to read ${file}: owned by uid ${st.uid}, not the server's ${owner.uid}`);
    return await fh.readFile("utf8");
  } finally {
    await fh.close();
  }
}

/**
 * Write-then-rename so PostgreSQL never reads a half-written file, owned by the run-as user.
 * Safe in a directory the server's user can write: the temp file is created O_EXCL|O_NOFOLLOW
 * (a name planted in advance is refused, never followed or reused), owner and mode are set on the
 * descriptor, the bytes flushed, and the rename replaces whatever is at `file` (a link included)
 * without following it. `file`'s directory must be one the server's user cannot replace (its parent
 * is the agent's), as for every directory this is called for.
 */
export async function writeOwned(runAs: FileOwner, file: string, content: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = `${file}.tmp-${rand()}`;
  let fh: FileHandle | undefined;
  try {
    fh = await open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST" || code === "ELOOP")
      throw new UnsafePathError(
        `refusing to write ${file}: its temporary name ${path.basename(tmp)} is taken (planted by the server's user?)`,
      );
    throw e;
  }
  try {
    await fh.chmod(mode);
    if (runAs.switchUser) await fh.chown(runAs.uid, runAs.gid);
    await fh.writeFile(content);
    await fh.datasync();
    await fh.close();
    fh = undefined;
    await rename(tmp, file);
  } catch (e) {
    await fh?.close().catch(() => {});
    // unlink never follows a link: at worst it removes one planted in our file's place.
    await unlink(tmp).catch(() => {});
    throw e;
  }
}

/**
 * `dir` exists as a directory (created `mode` if missing), owned by `owner` and of `mode` ("keep": 0700 when
 * made, an existing one's mode left as it is), changed on an O_NOFOLLOW descriptor: a link in its place is
 * refused, never followed. Resolves with whether it was made.
 */
export async function ensureOwnedDir(dir: string, owner: FileOwner, mode: number | "keep" = 0o700): Promise<boolean> {
  let made = true;
  await mkdir(dir, { mode: mode === "keep" ? 0o700 : mode }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== "EEXIST") throw e;
    made = false;
  });
  const fh = await openNoFollow(dir, O_RDONLY | O_DIRECTORY, "to own");
  try {
    const st = await fh.stat();
    if (owner.switchUser && (st.uid !== owner.uid || st.gid !== owner.gid)) await fh.chown(owner.uid, owner.gid);
    if (mode !== "keep" && (st.mode & 0o7777) !== mode) await fh.chmod(mode);
  } finally {
    await fh.close();
  }
  return made;
}

/**
 * Gives the existing file `file` to `owner` (and `mode`, if given) on an O_NOFOLLOW descriptor:
 * a link is refused, so root never chowns what one points at.
 */
export async function chownNoFollow(file: string, owner: { uid: number; gid: number }, mode?: number): Promise<void> {
  const fh = await openNoFollow(file, O_RDONLY | O_NONBLOCK, "to chown");
  try {
    const st = await fh.stat();
    if (!st.isFile() && !st.isDirectory()) throw new UnsafePathError(`refusing to chown ${file}: not a regular file`);
    if (st.uid !== owner.uid || st.gid !== owner.gid) await fh.chown(owner.uid, owner.gid);
    if (mode !== undefined && (st.mode & 0o7777) !== mode) await fh.chmod(mode);
  } finally {
    await fh.close();
  }
}

/** A log file the server (running as the run-as user) can append to: created or opened without following a link, given to it on the descriptor. */
export async function prepareLogFile(runAs: FileOwner, file: string): Promise<void> {
  const fh = await openNoFollow(file, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK, "to prepare the log", 0o600);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new UnsafePathError(`refusing to prepare the log ${file}: not a regular file`);
    if (runAs.switchUser && (st.uid !== runAs.uid || st.gid !== runAs.gid)) await fh.chown(runAs.uid, runAs.gid);
  } finally {
    await fh.close();
  }
}

/**
 * Removes the tree at `p` (nothing if missing) with GNU rm, which descends
 * with openat and O_NOFOLLOW and checks each directory it enters: a server's
 * user swapping a directory for a link mid-way cannot make it delete outside
 * the tree. fs.rm walks by path and could. `p`'s parent must be one the
 * server's user cannot replace (the link at `p` itself is removed, not followed).
 */
export async function removeTree(p: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    execFile("rm", ["-rf", "--one-file-system", "--", p], { timeout: 600_000 }, (e, _out, err) =>
      e ? reject(new Error(`rm -rf ${p} failed: ${err.trim() || e.message}`)) : resolve(),
    );
  });
}
