/**
 * The blob store backups and archived WAL live in: never only beside the
 * instance (the host's disk can be lost; a restore may run on another agent).
 * `BACKUP_STORE_URL` chooses the implementation: `file:///abs/dir` (the local
 * default, under DBAAS_DATA_DIR) or `s3://bucket/prefix` (any S3-compatible
 * store through @aws-sdk/client-s3; endpoint and credentials from the
 * standard AWS_* environment, plus BACKUP_S3_ENDPOINT for non-AWS stores).
 *
 * Contract every implementation keeps:
 * - **Atomic puts.** After `put` resolves the object is durably stored with
 *   exactly the given bytes; an interrupted put (crash, kill -9, network loss)
 *   leaves either no object or the previous one under that key, never a
 *   partial one visible to `get`/`list`.
 * - Keys are `/`-separated relative paths of `[A-Za-z0-9._-]` segments.
 * - `list(prefix)` returns every key starting with `prefix`, sorted, with sizes.
 * - `get` of a missing key rejects with `BlobNotFoundError`; `delete` of a
 *   missing key succeeds.
 * - Errors (store unreachable, permission denied) reject with a message fit
 *   for an operator; nothing retries inside.
 */
import type { Readable } from "node:stream";

export interface BlobInfo {
  key: string;
  size: number;
}

export interface BlobStore {
  /** Where the store is, for logs and status (never with credentials). */
  readonly description: string;
  /** Stores `body` (a stream is consumed; a file path is read) under `key`, atomically. */
  put(key: string, body: Readable | Buffer | { path: string }): Promise<void>;
  /** The object's bytes as a stream. */
  get(key: string): Promise<Readable>;
  /** Whether `key` exists. */
  exists(key: string): Promise<boolean>;
  list(prefix: string): Promise<BlobInfo[]>;
  delete(key: string): Promise<void>;
  /** Deletes every key under `prefix` (a purged database's backups). */
  deletePrefix(prefix: string): Promise<void>;
}

export class BlobNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`no object ${key} in the backup store`);
    this.name = "BlobNotFoundError";
  }
}

const SEGMENT = /^[A-Za-z0-9._-]+$/;

/**
 * Refuses a key outside the contract (absolute, `..`, empty segments, other
 * characters), so no implementation ever turns a key into a path escape.
 */
export function assertValidKey(key: string): void {
  const segments = key.split("/");
  if (!segments.every((s) => SEGMENT.test(s) && s !== "." && s !== "..")) {
    throw new Error(`invalid backup store key ${JSON.stringify(key)}: want /-separated segments of [A-Za-z0-9._-]`);
  }
}

/** A `list`/`deletePrefix` prefix: "" or whole valid segments, each followed by `/`, then a possibly partial one. */
export function assertValidPrefix(prefix: string): void {
  const segments = prefix.split("/");
  const last = segments.pop()!;
  if (!segments.every((s) => SEGMENT.test(s) && s !== "." && s !== "..") || !/^[A-Za-z0-9._-]*$/.test(last)) {
    throw new Error(`invalid backup store prefix ${JSON.stringify(prefix)}`);
  }
}
