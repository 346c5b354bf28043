import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import type { ServerFiles } from "../instance-access.ts";

/**
 * Unpacks a gzip'd tar stream (a base backup's `base.tar.gz`: plain ustar
 * from BASE_BACKUP) into `dir` with the system `tar`, run as the server's user
 * so every file it creates is owned by that user with the modes the archive
 * carries (0700 directories, 0600 files), as PostgreSQL demands. GNU tar
 * refuses members that would land outside `dir` (`..`, absolute names).
 */
export async function extractTarGz(src: Readable, dir: string, server: ServerFiles): Promise<void> {
  const child = server.spawn("tar", ["-x", "-f", "-", "-C", dir, "--no-same-owner"], ["pipe", "ignore", "pipe"]);
  const stderr: Buffer[] = [];
  child.stderr!.on("data", (b: Buffer) => stderr.push(b));
  const exited = new Promise<void>((resolve, reject) => {
    child.on("error", (e) => reject(new Error(`tar: ${e.message}`)));
    child.on("close", (code, signal) => {
      if (code === 0) resolve();
      else {
        const why = Buffer.concat(stderr).toString("utf8").trim().slice(-2000);
        reject(new Error(`tar -x into ${dir} ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${why ? `: ${why}` : ""}`));
      }
    });
  });
  const fed = pipeline(src, createGunzip(), child.stdin!);
  const [tarResult, feedResult] = await Promise.allSettled([exited, fed]);
  if (feedResult.status === "rejected") {
    src.destroy();
    // A pipe that broke because tar died: tar's own message says why.
    const code = (feedResult.reason as NodeJS.ErrnoException).code;
    if (tarResult.status === "rejected" && (code === "EPIPE" || code === "ERR_STREAM_DESTROYED")) throw tarResult.reason;
    throw new Error(`reading the base backup: ${(feedResult.reason as Error).message}`);
  }
  if (tarResult.status === "rejected") throw tarResult.reason;
}
