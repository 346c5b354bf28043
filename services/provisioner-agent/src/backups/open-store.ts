/**
 * `BACKUP_STORE_URL` → the blob store: `file:///abs/dir` or `s3://bucket/prefix`.
 * For S3 the rest comes from the environment: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or else the SDK's default
 * chain; AWS_REGION (default us-east-1); BACKUP_S3_ENDPOINT for a non-AWS
 * store, addressed path-style; BACKUP_S3_IDLE_TIMEOUT_MS (30000) for how long
 * a request may stall before it is abandoned; BACKUP_S3_SSE (AES256) the
 * server-side encryption every put asks for (AES256, aws:kms or none).
 *
 * With BACKUP_ENCRYPTION_KEY (the agent's config requires it) every object is
 * encrypted on the way in (encrypted-store.ts); `openRawStore` is the store
 * underneath, for the key rotation and tests of the store contract.
 */
import { fileURLToPath } from "node:url";
import { ConfigError } from "@dbaas/kit";
import { assertValidPrefix, type BlobStore } from "./blob-store.ts";
import { createEncryptedStore } from "./encrypted-store.ts";
import { type Keyring, keyringFromEnv } from "./encryption.ts";
import { createFileStore } from "./file-store.ts";
import { createS3Store } from "./s3-store.ts";

type Env = Record<string, string | undefined>;

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The backup store: encrypted under BACKUP_ENCRYPTION_KEY when the environment has one. */
export function openBlobStore(url: string, env: Env, log?: (msg: string) => void): BlobStore {
  const raw = openRawStore(url, env);
  const keyring = backupKeyring(env);
  return keyring ? createEncryptedStore(raw, keyring, log ? { log } : {}) : raw;
}

/** BACKUP_ENCRYPTION_KEY (+ _PREVIOUS) as a keyring, a ConfigError when malformed. */
export function backupKeyring(env: Env): Keyring | undefined {
  try {
    return keyringFromEnv(env);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

/** BACKUP_S3_SSE: AES256 unless set; `none` asks for nothing. */
export function s3ServerSideEncryption(env: Env): "AES256" | "aws:kms" | undefined {
  const raw = env.BACKUP_S3_SSE || "AES256";
  if (raw === "none") return undefined;
  if (raw === "AES256" || raw === "aws:kms") return raw;
  throw new ConfigError(`BACKUP_S3_SSE must be AES256, aws:kms or none, got ${JSON.stringify(raw)}`);
}

/** The store `url` names, without encryption. */
export function openRawStore(url: string, env: Env): BlobStore {
  const bad = (why: string) => new ConfigError(`BACKUP_STORE_URL ${JSON.stringify(url)} ${why}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw bad("is not a URL: want file:///absolute/dir or s3://bucket/prefix");
  }
  if (parsed.search || parsed.hash || parsed.username || parsed.password) {
    throw bad("must not carry a query, fragment or credentials (credentials come from AWS_* variables)");
  }
  if (parsed.protocol === "file:") {
    if (parsed.host !== "") throw bad("must be file:///absolute/dir (three slashes, no host)");
    return createFileStore(fileURLToPath(parsed));
  }
  if (parsed.protocol !== "s3:") throw bad("has an unknown scheme: want file:// or s3://");
  const bucket = parsed.hostname;
  if (!BUCKET.test(bucket)) throw bad(`names no valid bucket (got ${JSON.stringify(bucket)})`);
  const path = decodeURIComponent(parsed.pathname).replace(/^\/+/, "");
  const prefix = path === "" || path.endsWith("/") ? path : `${path}/`;
  try {
    assertValidPrefix(prefix);
  } catch {
    throw bad("has a prefix that is not /-separated segments of [A-Za-z0-9._-]");
  }
  const endpoint = env.BACKUP_S3_ENDPOINT || undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^/]+/.test(endpoint)) {
    throw new ConfigError(`BACKUP_S3_ENDPOINT must be an http(s) URL, got ${JSON.stringify(endpoint)}`);
  }
  const idle = env.BACKUP_S3_IDLE_TIMEOUT_MS;
  const idleTimeoutMs = idle === undefined || idle === "" ? undefined : Number(idle);
  if (idleTimeoutMs !== undefined && !(Number.isInteger(idleTimeoutMs) && idleTimeoutMs > 0)) {
    throw new ConfigError(`BACKUP_S3_IDLE_TIMEOUT_MS must be a positive number of milliseconds, got ${JSON.stringify(idle)}`);
  }
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  const sessionToken = env.AWS_SESSION_TOKEN || undefined;
  if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) {
    throw new ConfigError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set together or not at all");
  }
  const sse = s3ServerSideEncryption(env);
  return createS3Store({
    bucket,
    ...(sse ? { serverSideEncryption: sse } : {}),
    prefix,
    region: env.AWS_REGION || "us-east-1",
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    ...(idleTimeoutMs ? { idleTimeoutMs } : {}),
    ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } } : {}),
  });
}
