import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { createEncryptedStore, dataKeyObject, rewrapDataKeys } from "../../src/backups/encrypted-store.ts";
import {
  BackupDecryptionError,
  isSealed,
  type Keyring,
  keyringFromEnv,
  openStream,
  RECORD_BYTES,
  sealBuffer,
  sealedSize,
  sealStream,
} from "../../src/backups/encryption.ts";
import { createFileStore } from "../../src/backups/file-store.ts";

const run = promisify(execFile);

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** `data` through a stream in uneven chunks (so records never line up with them). */
const chunked = (data: Buffer, size = 7919) =>
  Readable.from(
    (function* () {
      for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
    })(),
  );

const dataKey = randomBytes(32);
const params = { dataKeyId: "0123456789abcdef01234567", dataKey, name: "db1/wal/000000010000000000000001.gz", recordBytes: 1000 };
const lookup = async (id: string) => {
  if (id !== params.dataKeyId) throw new Error(`unknown data key ${id}`);
  return dataKey;
};
const open = (sealed: Buffer, name = params.name) => readAll(chunked(sealed, 333).pipe(openStream(name, lookup)));
const sealed = (data: Buffer) => readAll(chunked(data).pipe(sealStream(params)));

/** Offsets of the records of a sealed object (after its header). */
function records(s: Buffer): { at: number; end: number }[] {
  const out: { at: number; end: number }[] = [];
  let at = 8 + 1 + 4 + 1 + params.dataKeyId.length + 32;
  while (at < s.length) {
    const end = at + 5 + s.readUInt32BE(at + 1) + 16;
    out.push({ at, end });
    at = end;
  }
  return out;
}

describe("the sealed object format", () => {
  it("round-trips every length around the record size, streamed and whole, to the byte", async () => {
    for (const n of [0, 1, 999, 1000, 1001, 2000, 3017]) {
      const data = randomBytes(n);
      const s = await sealed(data);
      expect(s.length, `${n}`).toBe(sealedSize(n, params.dataKeyId.length, 1000));
      expect(isSealed(s)).toBe(true);
      expect((await open(s)).equals(data), `${n}`).toBe(true);
      expect((await open(sealBuffer(params, data))).equals(data), `${n} whole`).toBe(true);
    }
  });

  it("seals every put differently (a fresh salt), and holds none of the plaintext", async () => {
    const data = Buffer.from("-----BEGIN PRIVATE KEY-----\n".repeat(100));
    const a = await sealed(data);
    const b = await sealed(data);
    expect(a.equals(b)).toBe(false);
    expect(a.includes(Buffer.from("PRIVATE KEY"))).toBe(false);
  });

  it("refuses a flipped bit, a truncation, a dropped or reordered record, and another object's name", async () => {
    const data = randomBytes(3500);
    const s = await sealed(data);
    const recs = records(s);
    expect(recs.length).toBe(4);

    const flipped = Buffer.from(s);
    flipped[recs[1]!.at + 10]! ^= 1;
    await expect(open(flipped)).rejects.toThrow(/record 1 failed authentication/);

    // Cut after a whole record: no final one.
    await expect(open(s.subarray(0, recs[2]!.end))).rejects.toThrow(/truncated after 3 records/);
    // Cut inside a record.
    await expect(open(s.subarray(0, recs[3]!.at + 7))).rejects.toThrow(/truncated/);
    // The final flag set on an earlier record (to end it there) breaks its AAD.
    const early = Buffer.from(s.subarray(0, recs[1]!.end));
    early[recs[1]!.at] = 1;
    await expect(open(early)).rejects.toThrow(/record 1 failed authentication/);
    // Records swapped.
    const swapped = Buffer.concat([
      s.subarray(0, recs[0]!.at),
      s.subarray(recs[1]!.at, recs[1]!.end),
      s.subarray(recs[0]!.at, recs[0]!.end),
      s.subarray(recs[2]!.at),
    ]);
    await expect(open(swapped)).rejects.toThrow(/record 0 failed authentication/);
    // Bytes after the final record.
    await expect(open(Buffer.concat([s, Buffer.from("x")]))).rejects.toThrow(/bytes follow its final record/);
    // The same bytes under another name.
    await expect(open(s, "db1/wal/000000010000000000000002.gz")).rejects.toThrow(BackupDecryptionError);
  });

  it("passes objects written before encryption through unchanged (gzip, JSON, tiny)", async () => {
    for (const plain of [gzipSync(randomBytes(5000)), Buffer.from('{"backupId":"b1"}'), Buffer.from("x"), Buffer.alloc(0)]) {
      expect((await readAll(chunked(plain, 3).pipe(openStream("db1/x", lookup)))).equals(plain)).toBe(true);
    }
  });
});

describe("the encrypted store", () => {
  let dir: string;
  let raw: BlobStore;
  const key = () => randomBytes(32).toString("base64");
  const oldKey = key();
  const newKey = key();
  const keyringOf = (env: Record<string, string>) => keyringFromEnv(env) as Keyring;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dbaas-encrypted-"));
    raw = createFileStore(dir);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("stores nothing readable: neither the bytes, nor gzip, nor the data key; the master key opens it", async () => {
    const store = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey }));
    const tar = gzipSync(Buffer.from("server.key -----BEGIN PRIVATE KEY----- ".repeat(1000)));
    await store.put("db-a/base/b1/base.tar.gz", chunked(tar, 65536));
    await store.put("db-a/base/b1/backup.json", Buffer.from('{"backupId":"b1"}'));
    const onDisk = await readFile(path.join(dir, "db-a/base/b1/base.tar.gz"));
    expect(isSealed(onDisk)).toBe(true);
    expect(() => gunzipSync(onDisk)).toThrow();
    expect(onDisk.includes(Buffer.from("PRIVATE KEY"))).toBe(false);
    expect((await readFile(path.join(dir, "db-a/base/b1/backup.json"))).includes(Buffer.from("backupId"))).toBe(false);
    const keys = await readdir(path.join(dir, "db-a/keys"));
    expect(keys).toHaveLength(1);
    // The data key object holds the key only wrapped.
    const wrapped = JSON.parse(await readFile(path.join(dir, "db-a/keys", keys[0]!), "utf8"));
    expect(Object.keys(wrapped).sort()).toEqual(["createdAt", "dataKeyId", "databaseId", "format", "masterKeyId", "version", "wrapped"]);
    // list shows the backups only.
    expect((await store.list("db-a/")).map((o) => o.key)).toEqual(["db-a/base/b1/backup.json", "db-a/base/b1/base.tar.gz"]);
    // Another agent (a store of its own) with the same master key reads it; one with another key does not.
    const other = createEncryptedStore(createFileStore(dir), keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey }));
    expect((await readAll(await other.get("db-a/base/b1/base.tar.gz"))).equals(tar)).toBe(true);
    const stranger = createEncryptedStore(createFileStore(dir), keyringOf({ BACKUP_ENCRYPTION_KEY: key() }));
    await expect(readAll(await stranger.get("db-a/base/b1/base.tar.gz"))).rejects.toThrow(/neither BACKUP_ENCRYPTION_KEY/);
  });

  it("reads objects written before encryption beside sealed ones", async () => {
    const old = gzipSync(Buffer.from("WAL written the old way"));
    await raw.put("db-b/wal/000000010000000000000001.gz", old);
    const store = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey }));
    await store.put("db-b/wal/000000010000000000000002.gz", gzipSync(Buffer.from("new")));
    expect(gunzipSync(await readAll(await store.get("db-b/wal/000000010000000000000001.gz"))).toString()).toBe("WAL written the old way");
    expect(gunzipSync(await readAll(await store.get("db-b/wal/000000010000000000000002.gz"))).toString()).toBe("new");
  });

  it("rotates the master key by re-wrapping data keys only, and a purge deletes the keys", async () => {
    const before = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey }));
    await before.put("db-c/wal/000000010000000000000001.gz", Buffer.from("c1"));
    const dataFile = path.join(dir, "db-c/wal/000000010000000000000001.gz");
    const sealedBefore = await readFile(dataFile);

    // The new key alone cannot open what the old one wrapped.
    const newOnly = keyringOf({ BACKUP_ENCRYPTION_KEY: newKey });
    await expect(readAll(await createEncryptedStore(raw, newOnly).get("db-c/wal/000000010000000000000001.gz"))).rejects.toThrow(
      /neither BACKUP_ENCRYPTION_KEY/,
    );
    const rotating = keyringOf({ BACKUP_ENCRYPTION_KEY: newKey, BACKUP_ENCRYPTION_KEY_PREVIOUS: oldKey });
    const result = await rewrapDataKeys(raw, rotating);
    expect(result.failed).toEqual([]);
    expect(result.rewrapped).toBeGreaterThanOrEqual(1); // db-a's and db-b's keys too
    expect((await rewrapDataKeys(raw, rotating)).rewrapped).toBe(0);
    // The data was not rewritten, and now opens under the new key alone.
    expect((await readFile(dataFile)).equals(sealedBefore)).toBe(true);
    const after = createEncryptedStore(raw, newOnly);
    expect((await readAll(await after.get("db-c/wal/000000010000000000000001.gz"))).toString()).toBe("c1");
    // The old key alone no longer opens it.
    await expect(
      readAll(await createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey })).get("db-c/wal/000000010000000000000001.gz")),
    ).rejects.toThrow(/neither BACKUP_ENCRYPTION_KEY/);

    await after.deletePrefix("db-c/");
    expect(await raw.list("db-c/")).toEqual([]);
  });

  it("re-wraps a data key under the current master key when an agent with both keys first uses it", async () => {
    const k1 = key();
    const k2 = key();
    const first = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: k1 }));
    await first.put("db-d/wal/000000010000000000000001.gz", Buffer.from("d1"));
    const keyObject = (await raw.list("db-d/keys/"))[0]!.key;
    const second = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: k2, BACKUP_ENCRYPTION_KEY_PREVIOUS: k1 }));
    expect((await readAll(await second.get("db-d/wal/000000010000000000000001.gz"))).toString()).toBe("d1");
    const w = JSON.parse((await readAll(await raw.get(keyObject))).toString());
    expect(w.masterKeyId).toBe(keyringOf({ BACKUP_ENCRYPTION_KEY: k2 }).current.id);
    expect(keyObject).toBe(dataKeyObject("db-d", w.dataKeyId));
    // Writes keep using that data key: no second one is made.
    await second.put("db-d/wal/000000010000000000000002.gz", Buffer.from("d2"));
    expect(await raw.list("db-d/keys/")).toHaveLength(1);
  });

  it("rotates through the operator's CLI: exit 1 naming the keys it cannot open, 0 once given the old key", {
    timeout: 120_000,
  }, async () => {
    const cliDir = await mkdtemp(path.join(tmpdir(), "dbaas-rewrap-"));
    try {
      const k1 = key();
      const k2 = key();
      await createEncryptedStore(createFileStore(cliDir), keyringOf({ BACKUP_ENCRYPTION_KEY: k1 })).put("db-g/wal/x.gz", Buffer.from("g"));
      const cli = (env: Record<string, string>) =>
        run(process.execPath, ["--import", "tsx", "services/provisioner-agent/src/cli/rewrap-backup-keys.ts"], {
          cwd: path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../.."),
          env: { PATH: process.env.PATH, BACKUP_STORE_URL: `file://${cliDir}`, ...env },
        }).then(
          (r) => ({ code: 0, out: r.stdout }),
          (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
        );
      const without = await cli({ BACKUP_ENCRYPTION_KEY: k2 });
      expect(without.code).toBe(1);
      expect(without.out).toMatch(/0 data key\(s\) re-wrapped .* 1 not opened\n {2}db-g\/keys\/[0-9a-f]+\.json: .*neither/s);
      const rotated = await cli({ BACKUP_ENCRYPTION_KEY: k2, BACKUP_ENCRYPTION_KEY_PREVIOUS: k1 });
      expect(rotated).toMatchObject({ code: 0, out: expect.stringMatching(/1 data key\(s\) re-wrapped/) });
      const store = createEncryptedStore(createFileStore(cliDir), keyringOf({ BACKUP_ENCRYPTION_KEY: k2 }));
      expect((await readAll(await store.get("db-g/wal/x.gz"))).toString()).toBe("g");
    } finally {
      await rm(cliDir, { recursive: true, force: true });
    }
  });

  it("refuses a data key object as an object key", async () => {
    const store = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey }));
    await expect(store.put("db-e/keys/abc.json", Buffer.from("x"))).rejects.toThrow(/data key/);
    await expect(store.get("db-e/keys/abc.json")).rejects.toThrow(/data key/);
  });

  it("streams: a put reads its source only as far as the store has taken, a get decrypts as it is read", async () => {
    const store = createEncryptedStore(raw, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey }));
    const size = 64 * RECORD_BYTES;
    const block = randomBytes(64 * 1024);
    let produced = 0;
    let taken = 0;
    let lead = 0;
    const body = Readable.from(
      (function* () {
        while (produced < size) {
          produced += block.length;
          yield block;
        }
      })(),
    );
    // A store that takes the sealed stream slowly: what it has not taken yet must not pile up in memory.
    const slow: BlobStore = {
      ...raw,
      async put(key, sealed) {
        if (!(sealed instanceof Readable)) return raw.put(key, sealed); // the data key object
        for await (const c of sealed as Readable) {
          taken += (c as Buffer).length;
          lead = Math.max(lead, produced - taken);
          await new Promise((r) => setImmediate(r));
        }
      },
    };
    await createEncryptedStore(slow, keyringOf({ BACKUP_ENCRYPTION_KEY: oldKey })).put("db-f/base/b1/base.tar.gz", body);
    expect(taken).toBeGreaterThan(size);
    expect(lead).toBeLessThan(4 * RECORD_BYTES);

    await store.put("db-f/base/b2/base.tar.gz", chunked(randomBytes(size), 65536));
    const stream = await store.get("db-f/base/b2/base.tar.gz");
    // The first bytes come before the object was read through.
    const first = await new Promise<Buffer>((resolve) => stream.once("data", resolve));
    expect(first.length).toBeLessThanOrEqual(RECORD_BYTES);
    stream.destroy();
  });
});
