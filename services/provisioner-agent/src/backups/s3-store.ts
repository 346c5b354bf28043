/**
 * The blob store on S3 or any S3-compatible service: `s3://bucket/prefix`.
 *
 * Puts go through lib-storage's `Upload`: a body up to one part is a single
 * PutObject, a longer one (a base backup of GBs, length unknown while it is
 * being compressed) a multipart upload holding at most QUEUE_SIZE parts in
 * memory. S3 makes an object visible only when its PutObject or
 * CompleteMultipartUpload succeeds, so an interrupted put leaves the previous
 * object; a failed multipart upload is aborted, and one cut short by a crash
 * stays invisible (give the bucket an AbortIncompleteMultipartUpload
 * lifecycle rule so its parts do not linger).
 *
 * An unreachable store is reported within seconds (3 s to connect), a stalled
 * one within about a minute (`idleTimeoutMs`, 30 s by default, twice): the
 * SDK's one retry of a request is all that retries here; the callers (the
 * archiver, base backups) retry the operation.
 */
import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  paginateListObjectsV2,
  S3Client,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { assertValidKey, assertValidPrefix, type BlobInfo, BlobNotFoundError, type BlobStore } from "./blob-store.ts";

export interface S3StoreOptions {
  bucket: string;
  /** Prefix of every key inside the bucket: "" or ending in "/". */
  prefix: string;
  /** A non-AWS store (`http://host:port`); such stores get only the checksums S3 requires. */
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  /** Without them, the SDK's default chain (environment, shared files, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /**
   * How long a request may wait for the store to send or take a byte before it
   * is abandoned (BACKUP_S3_IDLE_TIMEOUT_MS). Default 30 s.
   */
  idleTimeoutMs?: number;
  /**
   * Server-side encryption every put asks for (BACKUP_S3_SSE): `AES256` (S3's
   * own keys, the default), `aws:kms`, or none (for a store that refuses the
   * header). On top of the agent's own encryption (encrypted-store.ts), not instead.
   */
  serverSideEncryption?: "AES256" | "aws:kms";
}

/** 8 MiB parts: objects up to ~78 GiB within S3's 10,000 parts, at most 16 MiB buffered per put. */
const PART_SIZE = 8 * 1024 * 1024;
const QUEUE_SIZE = 2;
const DELETE_BATCH = 1000;
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;

interface SdkError {
  name?: string;
  message?: string;
  code?: string;
  /** Node's AggregateError (connecting to every address of a host failed) has an empty message and these. */
  errors?: unknown[];
  $metadata?: { httpStatusCode?: number };
}

/**
 * A missing object: GET and DELETE say so with the NoSuchKey code in the body;
 * HEAD has no body, only 404. (A 404 from a wrong endpoint, or NoSuchBucket,
 * is a store error, not a missing object.)
 */
const isNoSuchKey = (err: unknown) => (err as SdkError).name === "NoSuchKey";
const isHeadNotFound = (err: unknown) => (err as SdkError).name === "NotFound" || (err as SdkError).$metadata?.httpStatusCode === 404;

/** The SDK's error, said so an operator can act: its name or errno code, and what it says. */
function describe(err: unknown): string {
  const e = err as SdkError;
  const status = e.$metadata?.httpStatusCode;
  const what = [e.name && e.name !== "Error" ? e.name : e.code, status ? `HTTP ${status}` : undefined].filter(Boolean).join(", ");
  const message = e.message
    ? e.message
    : Array.isArray(e.errors) && e.errors.length > 0
      ? e.errors.map((inner) => (inner as Error).message).join("; ")
      : "no message";
  return what ? `${message} (${what})` : message;
}

export function createS3Store(opts: S3StoreOptions): BlobStore {
  const { bucket } = opts;
  const base = opts.prefix === "" || opts.prefix.endsWith("/") ? opts.prefix : `${opts.prefix}/`;
  if (base !== "") assertValidPrefix(base);
  const description = `s3://${bucket}/${base}${opts.endpoint ? ` at ${opts.endpoint}` : ""}`;
  const client = new S3Client({
    region: opts.region ?? "us-east-1",
    ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
    forcePathStyle: opts.forcePathStyle ?? Boolean(opts.endpoint),
    ...(opts.credentials ? { credentials: opts.credentials } : {}),
    // Other S3 implementations rarely understand the aws-chunked trailing checksums AWS gets by default.
    ...(opts.endpoint ? { requestChecksumCalculation: "WHEN_REQUIRED", responseChecksumValidation: "WHEN_REQUIRED" } : {}),
    maxAttempts: 2,
    // socketTimeout (idle) catches a store that accepts connections but stalls; it also bounds
    // how long a reader may pause a download's body.
    requestHandler: { connectionTimeout: 3_000, socketTimeout: opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS },
  });
  const fullKey = (key: string) => {
    assertValidKey(key);
    return base + key;
  };
  const failure = (op: string, key: string, err: unknown) =>
    new Error(`backup store ${description}: ${op} ${key} failed: ${describe(err)}`, { cause: err });

  async function list(prefix: string): Promise<BlobInfo[]> {
    assertValidPrefix(prefix);
    const out: BlobInfo[] = [];
    try {
      for await (const page of paginateListObjectsV2({ client }, { Bucket: bucket, Prefix: base + prefix })) {
        for (const o of page.Contents ?? []) if (o.Key) out.push({ key: o.Key.slice(base.length), size: o.Size ?? 0 });
      }
    } catch (err) {
      throw failure("list", `${prefix}*`, err);
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  return {
    description,

    async put(key, body) {
      const Key = fullKey(key);
      const source = Buffer.isBuffer(body) || body instanceof Readable ? body : createReadStream(body.path);
      // When the source breaks, that is the news, not what aborting the upload then says.
      let sourceError: unknown;
      if (source instanceof Readable) source.once("error", (err: Error) => (sourceError ??= err));
      const upload = new Upload({
        client,
        params: {
          Bucket: bucket,
          Key,
          Body: source,
          ...(opts.serverSideEncryption ? { ServerSideEncryption: opts.serverSideEncryption } : {}),
        },
        partSize: PART_SIZE,
        queueSize: QUEUE_SIZE,
        leavePartsOnError: false,
      });
      try {
        await upload.done();
      } catch (err) {
        if (source instanceof Readable) source.destroy();
        throw failure("put", key, sourceError ?? err);
      }
    },

    async get(key) {
      const Key = fullKey(key);
      try {
        const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key }));
        return out.Body as Readable;
      } catch (err) {
        if (isNoSuchKey(err)) throw new BlobNotFoundError(key);
        throw failure("get", key, err);
      }
    },

    async exists(key) {
      const Key = fullKey(key);
      try {
        await client.send(new HeadObjectCommand({ Bucket: bucket, Key }));
        return true;
      } catch (err) {
        if (isHeadNotFound(err)) return false;
        throw failure("head", key, err);
      }
    },

    list,

    async delete(key) {
      const Key = fullKey(key);
      try {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }));
      } catch (err) {
        if (!isNoSuchKey(err)) throw failure("delete", key, err);
      }
    },

    async deletePrefix(prefix) {
      const keys = (await list(prefix)).map((o) => base + o.key);
      for (let i = 0; i < keys.length; i += DELETE_BATCH) {
        const batch = keys.slice(i, i + DELETE_BATCH);
        let errors: { Key?: string; Code?: string; Message?: string }[];
        try {
          const out = await client.send(
            new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
          );
          errors = out.Errors ?? [];
        } catch (err) {
          throw failure("delete", `${prefix}*`, err);
        }
        if (errors.length > 0) {
          const first = errors[0]!;
          throw new Error(
            `backup store ${description}: delete ${prefix}* failed for ${errors.length} objects, e.g. ${first.Key}: ${first.Message ?? first.Code}`,
          );
        }
      }
    },
  };
}
