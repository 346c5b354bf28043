/**
 * Backups at rest: the format every object of the backup store is written in
 * (AES-256-GCM, streamed in records) and the wrapping of the per-database
 * data keys under the master key (`BACKUP_ENCRYPTION_KEY`). encrypted-store.ts
 * applies both to a BlobStore.
 *
 * An encrypted object ("sealed", format v1):
 *
 *   header   magic "\x89DBENC\r\n" (8) | version 1 (1) | record size R, u32 BE (4)
 *            | data key id length n (1) | data key id, ASCII (n) | salt (32, random)
 *   records  flag (1: 0 = more follow, 1 = final) | plaintext length L ≤ R, u32 BE (4)
 *            | ciphertext (L) | GCM tag (16)
 *
 * - Every object gets a key of its own: HKDF-SHA256(data key, salt,
 *   "dbaas-backup-object:v1:" + object key). A fresh 32-byte salt per put makes
 *   (key, nonce) pairs unique without counting puts, and naming the object key
 *   binds the content to its name: an object copied under another name (a WAL
 *   segment posing as another) fails to open.
 * - Record i's nonce is 4 zero bytes | i as u64 BE, unique under the object key.
 * - Record i's AAD is the whole header | i as u64 BE | its flag byte. Records
 *   cannot be reordered (index), dropped from the end (the last one read must
 *   carry the final flag, and a final record must be the last bytes), or
 *   grafted from another object (the header, hence salt and key, differ).
 * - Every record but the last holds exactly R plaintext bytes; an empty object
 *   is one empty final record. Readers refuse L > R, so a forged length cannot
 *   make them buffer more than one record.
 *
 * Objects written before encryption (gzip, or JSON) have no magic; readers
 * pass them through unchanged (a gzip stream starts 1f 8b, JSON with "{").
 *
 * A data key (32 random bytes) is stored wrapped: AES-256-GCM under the master
 * key with a random 12-byte nonce and AAD "dbaas-backup-data-key:v1:<database
 * id>:<data key id>", as JSON naming the master key by its id (HMAC of a fixed
 * string under it, so the id reveals nothing of the key). Rotating the master
 * key re-wraps these small objects and never touches the data.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";

export const MAGIC = Buffer.from("\x89DBENC\r\n", "latin1");
const VERSION = 1;
/** Plaintext bytes per record: 1 MiB, so a reader buffers at most about that much. */
export const RECORD_BYTES = 1024 * 1024;
const SALT_BYTES = 32;
const TAG_BYTES = 16;
const RECORD_HEAD = 5;
const FIXED_HEADER = MAGIC.length + 1 + 4 + 1;
const DATA_KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const KEY_BYTES = 32;

/** Failures to open an object or a data key: tampered, truncated, or the wrong key. */
export class BackupDecryptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BackupDecryptionError";
  }
}

// ---------------------------------------------------------------- master keys

export interface MasterKey {
  /** 16 hex digits naming the key in wrapped data keys. */
  id: string;
  key: Buffer;
}

/** The master key and, while a rotation is under way, the ones before it. */
export interface Keyring {
  current: MasterKey;
  previous: MasterKey[];
}

export function masterKeyId(key: Buffer): string {
  return createHmac("sha256", key).update("dbaas-backup-master-key-id").digest("hex").slice(0, 16);
}

/** A master key from its base64 form; the message names `setting` and never shows the value. */
export function parseMasterKey(raw: string, setting: string): MasterKey {
  const trimmed = raw.trim();
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)
    ? Buffer.from(trimmed, trimmed.includes("-") || trimmed.includes("_") ? "base64url" : "base64")
    : Buffer.alloc(0);
  if (key.length !== KEY_BYTES) {
    throw new Error(
      `${setting} must be ${KEY_BYTES} bytes in base64 (e.g. \`openssl rand -base64 32\`), got ${key.length === 0 ? "no base64" : `${key.length} bytes`}`,
    );
  }
  return { id: masterKeyId(key), key };
}

/** BACKUP_ENCRYPTION_KEY and BACKUP_ENCRYPTION_KEY_PREVIOUS (comma-separated) as a keyring; undefined without the first. */
export function keyringFromEnv(env: Record<string, string | undefined>): Keyring | undefined {
  const raw = env.BACKUP_ENCRYPTION_KEY;
  if (raw === undefined || raw.trim() === "") return undefined;
  const current = parseMasterKey(raw, "BACKUP_ENCRYPTION_KEY");
  const previous = (env.BACKUP_ENCRYPTION_KEY_PREVIOUS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((s, i) => parseMasterKey(s, `BACKUP_ENCRYPTION_KEY_PREVIOUS (entry ${i + 1})`))
    .filter((k) => k.id !== current.id);
  return { current, previous };
}

// ---------------------------------------------------------------- data keys

export interface WrappedDataKey {
  format: "dbaas-backup-data-key";
  version: 1;
  databaseId: string;
  dataKeyId: string;
  masterKeyId: string;
  /** base64: nonce (12) | ciphertext (32) | tag (16). */
  wrapped: string;
  createdAt: string;
}

const wrapAad = (databaseId: string, dataKeyId: string) => Buffer.from(`dbaas-backup-data-key:v1:${databaseId}:${dataKeyId}`);

export const newDataKeyId = () => randomBytes(12).toString("hex");

export function wrapDataKey(
  master: MasterKey,
  databaseId: string,
  dataKeyId: string,
  dataKey: Buffer,
  createdAt = new Date(),
): WrappedDataKey {
  const nonce = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", master.key, nonce);
  cipher.setAAD(wrapAad(databaseId, dataKeyId));
  const sealed = Buffer.concat([nonce, cipher.update(dataKey), cipher.final(), cipher.getAuthTag()]);
  return {
    format: "dbaas-backup-data-key",
    version: 1,
    databaseId,
    dataKeyId,
    masterKeyId: master.id,
    wrapped: sealed.toString("base64"),
    createdAt: createdAt.toISOString(),
  };
}

/** The data key, and the master key that opened it (the caller re-wraps when that is not the current one). */
export function unwrapDataKey(keyring: Keyring, w: WrappedDataKey, databaseId: string): { dataKey: Buffer; master: MasterKey } {
  if (w.format !== "dbaas-backup-data-key" || w.version !== 1 || w.databaseId !== databaseId || !DATA_KEY_ID.test(w.dataKeyId ?? "")) {
    throw new BackupDecryptionError(`data key ${w.dataKeyId} of ${databaseId} is not a data key record of this format`);
  }
  const master = [keyring.current, ...keyring.previous].find((k) => k.id === w.masterKeyId);
  if (!master) {
    throw new BackupDecryptionError(
      `data key ${w.dataKeyId} of ${databaseId} is wrapped by master key ${w.masterKeyId}, which is neither ` +
        `BACKUP_ENCRYPTION_KEY (${keyring.current.id}) nor in BACKUP_ENCRYPTION_KEY_PREVIOUS` +
        (keyring.previous.length > 0 ? ` (${keyring.previous.map((k) => k.id).join(", ")})` : ""),
    );
  }
  const sealed = Buffer.from(w.wrapped, "base64");
  try {
    const decipher = createDecipheriv("aes-256-gcm", master.key, sealed.subarray(0, 12));
    decipher.setAAD(wrapAad(databaseId, w.dataKeyId));
    decipher.setAuthTag(sealed.subarray(12 + KEY_BYTES));
    const dataKey = Buffer.concat([decipher.update(sealed.subarray(12, 12 + KEY_BYTES)), decipher.final()]);
    if (dataKey.length !== KEY_BYTES || sealed.length !== 12 + KEY_BYTES + TAG_BYTES) throw new Error("wrong length");
    return { dataKey, master };
  } catch {
    throw new BackupDecryptionError(`data key ${w.dataKeyId} of ${databaseId} failed authentication under master key ${master.id}`);
  }
}

// ---------------------------------------------------------------- objects

function objectKey(dataKey: Buffer, salt: Buffer, name: string): Buffer {
  return Buffer.from(hkdfSync("sha256", dataKey, salt, `dbaas-backup-object:v1:${name}`, KEY_BYTES));
}

function nonceOf(index: number): Buffer {
  const n = Buffer.alloc(12);
  n.writeBigUInt64BE(BigInt(index), 4);
  return n;
}

function aadOf(header: Buffer, index: number, final: boolean): Buffer {
  const tail = Buffer.alloc(9);
  tail.writeBigUInt64BE(BigInt(index), 0);
  tail[8] = final ? 1 : 0;
  return Buffer.concat([header, tail]);
}

function buildHeader(dataKeyId: string, recordBytes: number): { header: Buffer; salt: Buffer } {
  if (!DATA_KEY_ID.test(dataKeyId)) throw new Error(`invalid data key id ${JSON.stringify(dataKeyId)}`);
  const salt = randomBytes(SALT_BYTES);
  const fixed = Buffer.alloc(FIXED_HEADER);
  MAGIC.copy(fixed, 0);
  fixed[MAGIC.length] = VERSION;
  fixed.writeUInt32BE(recordBytes, MAGIC.length + 1);
  fixed[MAGIC.length + 5] = dataKeyId.length;
  return { header: Buffer.concat([fixed, Buffer.from(dataKeyId, "ascii"), salt]), salt };
}

/** Bytes a sealed object of `plaintextBytes` takes in the store (header + records). */
export function sealedSize(plaintextBytes: number, dataKeyIdLength = 24, recordBytes = RECORD_BYTES): number {
  const records = Math.max(1, Math.ceil(plaintextBytes / recordBytes));
  return FIXED_HEADER + dataKeyIdLength + SALT_BYTES + records * (RECORD_HEAD + TAG_BYTES) + plaintextBytes;
}

function sealRecord(key: Buffer, header: Buffer, index: number, final: boolean, plaintext: Buffer): Buffer[] {
  const cipher = createCipheriv("aes-256-gcm", key, nonceOf(index));
  cipher.setAAD(aadOf(header, index, final));
  const head = Buffer.alloc(RECORD_HEAD);
  head[0] = final ? 1 : 0;
  head.writeUInt32BE(plaintext.length, 1);
  return [head, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()];
}

export interface SealParams {
  dataKeyId: string;
  dataKey: Buffer;
  /** The object's key in the store: bound into its encryption. */
  name: string;
  recordBytes?: number;
}

/** A whole (small) object sealed at once: the same bytes the stream would write. */
export function sealBuffer(p: SealParams, plaintext: Buffer): Buffer {
  const recordBytes = p.recordBytes ?? RECORD_BYTES;
  const { header, salt } = buildHeader(p.dataKeyId, recordBytes);
  const key = objectKey(p.dataKey, salt, p.name);
  const parts = [header];
  let index = 0;
  let offset = 0;
  do {
    const end = Math.min(offset + recordBytes, plaintext.length);
    parts.push(...sealRecord(key, header, index++, end === plaintext.length, plaintext.subarray(offset, end)));
    offset = end;
  } while (offset < plaintext.length);
  return Buffer.concat(parts);
}

/**
 * Seals a stream: records of exactly `recordBytes`, the last flagged final
 * (it is only known to be last at the end, so one record is held back).
 */
export function sealStream(p: SealParams): Transform {
  const recordBytes = p.recordBytes ?? RECORD_BYTES;
  const { header, salt } = buildHeader(p.dataKeyId, recordBytes);
  const key = objectKey(p.dataKey, salt, p.name);
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let index = 0;
  let started = false;
  const take = (n: number): Buffer => {
    const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
    pending = all.length > n ? [all.subarray(n)] : [];
    pendingBytes = all.length - n;
    return all.subarray(0, n);
  };
  return new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      if (!started) {
        this.push(header);
        started = true;
      }
      pending.push(chunk);
      pendingBytes += chunk.length;
      // Strictly more than a record: the one at the end may be the last.
      while (pendingBytes > recordBytes) for (const b of sealRecord(key, header, index++, false, take(recordBytes))) this.push(b);
      cb();
    },
    flush(cb: TransformCallback) {
      if (!started) this.push(header);
      for (const b of sealRecord(key, header, index++, true, take(pendingBytes))) this.push(b);
      cb();
    },
  });
}

/** The data key named by an object's header. */
export type DataKeyLookup = (dataKeyId: string) => Promise<Buffer>;

/**
 * Opens a stream read from the store: a sealed object is authenticated and
 * decrypted record by record; anything without the magic (a backup written
 * before encryption) passes through unchanged.
 */
export function openStream(name: string, lookup: DataKeyLookup): Transform {
  type Mode = "header" | "plain" | "records" | "done";
  let mode: Mode = "header";
  let buf: Buffer = Buffer.alloc(0);
  let header: Buffer = Buffer.alloc(0);
  let key: Buffer = Buffer.alloc(0);
  let recordBytes = 0;
  let index = 0;
  const fail = (why: string) => new BackupDecryptionError(`backup object ${name}: ${why}`);

  async function readHeader(stream: Transform): Promise<void> {
    if (buf.length < MAGIC.length) return;
    if (!buf.subarray(0, MAGIC.length).equals(MAGIC)) {
      mode = "plain";
      stream.push(buf);
      buf = Buffer.alloc(0);
      return;
    }
    if (buf.length < FIXED_HEADER) return;
    if (buf[MAGIC.length] !== VERSION) throw fail(`unknown encryption format version ${buf[MAGIC.length]}`);
    recordBytes = buf.readUInt32BE(MAGIC.length + 1);
    if (recordBytes === 0 || recordBytes > 64 * RECORD_BYTES) throw fail(`implausible record size ${recordBytes}`);
    const idLength = buf[MAGIC.length + 5]!;
    const total = FIXED_HEADER + idLength + SALT_BYTES;
    if (buf.length < total) return;
    const dataKeyId = buf.subarray(FIXED_HEADER, FIXED_HEADER + idLength).toString("ascii");
    if (!DATA_KEY_ID.test(dataKeyId)) throw fail("its header names no valid data key");
    header = Buffer.from(buf.subarray(0, total));
    const dataKey = await lookup(dataKeyId);
    key = objectKey(dataKey, header.subarray(total - SALT_BYTES), name);
    buf = buf.subarray(total);
    mode = "records";
  }

  /** Bytes the next step needs buffered: a record's head, then the whole record. */
  function needed(): number {
    if (mode !== "records" || buf.length < RECORD_HEAD) return mode === "header" ? MAGIC.length : RECORD_HEAD;
    return RECORD_HEAD + buf.readUInt32BE(1) + TAG_BYTES;
  }

  function readRecords(stream: Transform): void {
    while (mode === "records" && buf.length >= RECORD_HEAD) {
      const flag = buf[0]!;
      const length = buf.readUInt32BE(1);
      if (flag > 1 || length > recordBytes) throw fail(`record ${index} is malformed`);
      const end = RECORD_HEAD + length + TAG_BYTES;
      if (buf.length < end) return;
      const final = flag === 1;
      const decipher = createDecipheriv("aes-256-gcm", key, nonceOf(index));
      decipher.setAAD(aadOf(header, index, final));
      decipher.setAuthTag(buf.subarray(RECORD_HEAD + length, end));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(buf.subarray(RECORD_HEAD, RECORD_HEAD + length)), decipher.final()]);
      } catch {
        throw fail(`record ${index} failed authentication (tampered, reordered, or not this object's)`);
      }
      if (!final && length !== recordBytes) throw fail(`record ${index} is short but not final`);
      stream.push(plain);
      buf = buf.subarray(end);
      index++;
      if (final) mode = "done";
    }
  }

  // Chunks wait in `parts` until a step can use them, so a record is copied together once, not per chunk.
  let parts: Buffer[] = [];
  let partsBytes = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      if (mode === "plain") return cb(null, chunk);
      if (mode === "done") return cb(fail("bytes follow its final record"));
      parts.push(chunk);
      partsBytes += chunk.length;
      if (buf.length + partsBytes < needed()) return cb();
      buf = Buffer.concat([buf, ...parts]);
      parts = [];
      partsBytes = 0;
      const step = async () => {
        if (mode === "header") await readHeader(this);
        if (mode === "records") readRecords(this);
        if (mode === "done" && buf.length > 0) throw fail("bytes follow its final record");
      };
      step().then(
        () => cb(),
        (err: unknown) => cb(err as Error),
      );
    },
    flush(cb: TransformCallback) {
      buf = Buffer.concat([buf, ...parts]);
      if (mode === "header") {
        // Shorter than a header: only a plain (old) object can be this small.
        if (isSealed(buf)) return cb(fail("truncated in its header"));
        return cb(null, buf);
      }
      if (mode === "records") {
        try {
          readRecords(this);
        } catch (err) {
          return cb(err as Error);
        }
        if (mode === "records") return cb(fail(`truncated after ${index} records (no final record)`));
      }
      if (buf.length > 0) return cb(fail("bytes follow its final record"));
      cb();
    },
  });
}

/** Whether `head` (an object's first bytes) starts a sealed object. */
export const isSealed = (head: Buffer) => head.length >= MAGIC.length && head.subarray(0, MAGIC.length).equals(MAGIC);
