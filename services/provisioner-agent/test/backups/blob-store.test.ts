import { createHash, randomBytes } from "node:crypto";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from "node:fs/promises";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { pathToFileURL } from "node:url";
import { ConfigError } from "@dbaas/kit";
import { startS3Server, type S3Server } from "@dbaas/test/support/s3-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlobNotFoundError, type BlobStore } from "../../src/backups/blob-store.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { sealedSize } from "../../src/backups/encryption.ts";
import { openBlobStore } from "../../src/backups/open-store.ts";
import { readConfig } from "../../src/config.ts";
import { freePort } from "../instances/helpers.ts";

// One contract, two stores: the file store in a temp directory and the S3
// store against s3rver (a real S3 server in this process).

const MiB = 1024 * 1024;

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Yields `data` in 1 MiB chunks, then fails after `failAfter` bytes (if given). */
function source(data: Buffer, failAfter?: number): Readable {
  return Readable.from(
    (async function* () {
      for (let at = 0; at < data.length; at += MiB) {
        if (failAfter !== undefined && at >= failAfter) throw new Error("source broke half-way");
        yield data.subarray(at, at + MiB);
      }
    })(),
  );
}

let scratch: string;
let s3: S3Server;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "dbaas-blob-"));
  s3 = await startS3Server();
});

afterAll(async () => {
  await s3?.close();
  await rm(scratch, { recursive: true, force: true });
});

/** The agent's stores encrypt (encrypted-store.ts): the same contract holds over them, with sealed sizes. */
const ENCRYPTED = { BACKUP_ENCRYPTION_KEY: randomBytes(32).toString("base64") };
const plainSize = (n: number) => n;
const stores: { name: string; open: (tag: string) => BlobStore; stored: (n: number) => number }[] = [
  { name: "file", open: (tag) => openBlobStore(`file://${scratch}/store-${tag}`, {}), stored: plainSize },
  { name: "s3", open: (tag) => openBlobStore(`s3://dbaas-backups/${tag}`, s3.env), stored: plainSize },
  { name: "encrypted file", open: (tag) => openBlobStore(`file://${scratch}/store-${tag}`, ENCRYPTED), stored: (n) => sealedSize(n) },
  {
    name: "encrypted s3",
    open: (tag) => openBlobStore(`s3://dbaas-backups/${tag}`, { ...s3.env, ...ENCRYPTED }),
    stored: (n) => sealedSize(n),
  },
];

describe.each(stores)("$name store", ({ name, open, stored }) => {
  let store: BlobStore;
  let n = 0;
  // A fresh store (own directory or own prefix in the bucket) per test.
  const fresh = () => {
    store = open(`${name.replace(" ", "-")}-${++n}`);
    return store;
  };

  it("round-trips a Buffer and a stream, and overwrites", async () => {
    fresh();
    await store.put("db1/base/b1/backup.json", Buffer.from('{"a":1}'));
    expect((await readAll(await store.get("db1/base/b1/backup.json"))).toString()).toBe('{"a":1}');
    const data = randomBytes(3 * MiB + 17);
    await store.put("db1/wal/000000010000000000000001.gz", source(data));
    expect((await readAll(await store.get("db1/wal/000000010000000000000001.gz"))).equals(data)).toBe(true);
    await store.put("db1/base/b1/backup.json", Buffer.from("second"));
    expect((await readAll(await store.get("db1/base/b1/backup.json"))).toString()).toBe("second");
    expect(await store.exists("db1/base/b1/backup.json")).toBe(true);
    await store.put("db1/empty", Buffer.alloc(0));
    expect((await readAll(await store.get("db1/empty"))).length).toBe(0);
  });

  it("round-trips a 20 MiB file byte-identical, from a path and from a stream", async () => {
    fresh();
    const data = randomBytes(20 * MiB);
    const file = path.join(scratch, `big-${name}`);
    await writeFile(file, data);
    await store.put("db1/base/b1/base.tar.gz", { path: file });
    expect(sha256(await readAll(await store.get("db1/base/b1/base.tar.gz")))).toBe(sha256(data));
    await store.put("db1/base/b2/base.tar.gz", source(data));
    expect(sha256(await readAll(await store.get("db1/base/b2/base.tar.gz")))).toBe(sha256(data));
    expect(await store.list("db1/base/")).toEqual([
      { key: "db1/base/b1/base.tar.gz", size: stored(20 * MiB) },
      { key: "db1/base/b2/base.tar.gz", size: stored(20 * MiB) },
    ]);
  });

  it("lists keys sorted with sizes, filtered by prefix", async () => {
    fresh();
    const keys = [
      "db1/wal/000000010000000000000003.gz",
      "db10/wal/000000010000000000000001.gz",
      "db1/base/b1/backup_manifest",
      "db1/wal/000000010000000000000001.gz",
      "db1/wal/00000002.history.gz",
      "db1/wal/000000010000000000000002.gz",
    ];
    for (const [i, key] of keys.entries()) await store.put(key, Buffer.alloc(i + 1));
    const size = (key: string) => stored(keys.indexOf(key) + 1);
    const sorted = [...keys].sort();
    expect(await store.list("")).toEqual(sorted.map((key) => ({ key, size: size(key) })));
    expect((await store.list("db1/")).map((o) => o.key)).toEqual(sorted.filter((k) => k.startsWith("db1/")));
    expect((await store.list("db1/wal/0000000100")).map((o) => o.key)).toEqual([
      "db1/wal/000000010000000000000001.gz",
      "db1/wal/000000010000000000000002.gz",
      "db1/wal/000000010000000000000003.gz",
    ]);
    expect((await store.list("db1")).length).toBe(keys.length);
    expect(await store.list("db2/")).toEqual([]);
    expect(await store.list("db1/wal/000000010000000000000002.gz")).toEqual([
      { key: "db1/wal/000000010000000000000002.gz", size: stored(6) },
    ]);
  });

  it("reports a missing object: get rejects with BlobNotFoundError, exists is false", async () => {
    fresh();
    await expect(store.get("db1/wal/none.gz")).rejects.toBeInstanceOf(BlobNotFoundError);
    await expect(store.get("db1/wal/none.gz")).rejects.toMatchObject({ key: "db1/wal/none.gz" });
    expect(await store.exists("db1/wal/none.gz")).toBe(false);
    await store.put("db1/wal/a.gz", Buffer.from("x"));
    expect(await store.exists("db1/wal")).toBe(false);
    await expect(store.get("db1/wal")).rejects.toBeInstanceOf(BlobNotFoundError);
  });

  it("deletes idempotently, and deletes everything under a prefix", async () => {
    fresh();
    await store.put("db1/wal/a.gz", Buffer.from("a"));
    await store.delete("db1/wal/a.gz");
    expect(await store.exists("db1/wal/a.gz")).toBe(false);
    await store.delete("db1/wal/a.gz");
    await store.delete("never/was");

    for (const key of ["db1/wal/1.gz", "db1/wal/2.gz", "db1/base/b1/backup.json", "db10/wal/1.gz", "db2/wal/1.gz", "db2/wal/2.gz"]) {
      await store.put(key, Buffer.from(key));
    }
    await store.deletePrefix("db1/");
    expect((await store.list("")).map((o) => o.key)).toEqual(["db10/wal/1.gz", "db2/wal/1.gz", "db2/wal/2.gz"]);
    await store.deletePrefix("db2/wal/1");
    expect((await store.list("")).map((o) => o.key)).toEqual(["db10/wal/1.gz", "db2/wal/2.gz"]);
    await store.deletePrefix("db1/");
    await store.deletePrefix("");
    expect(await store.list("")).toEqual([]);
    await store.put("db1/wal/1.gz", Buffer.from("after"));
    expect((await readAll(await store.get("db1/wal/1.gz"))).toString()).toBe("after");
  });

  it("deletes more than one batch under a prefix", async () => {
    fresh();
    const keys = Array.from({ length: 1005 }, (_, i) => `db1/wal/${String(i).padStart(24, "0")}.gz`);
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => store.put(k, Buffer.from("w"))));
    expect((await store.list("db1/")).length).toBe(1005);
    await store.deletePrefix("db1/");
    expect(await store.list("")).toEqual([]);
  });

  it("leaves no object, or the previous one, when the source fails half-way", async () => {
    fresh();
    const data = randomBytes(20 * MiB);
    // Past the first 8 MiB part on S3: a multipart upload had begun.
    await expect(store.put("db1/base/b1/base.tar.gz", source(data, 12 * MiB))).rejects.toThrow(/source broke half-way/);
    await expect(store.put("db1/wal/small.gz", source(data.subarray(0, 3 * MiB), MiB))).rejects.toThrow(/source broke half-way/);
    expect(await store.exists("db1/base/b1/base.tar.gz")).toBe(false);
    expect(await store.exists("db1/wal/small.gz")).toBe(false);
    expect(await store.list("")).toEqual([]);

    await store.put("db1/base/b1/base.tar.gz", Buffer.from("previous"));
    await expect(store.put("db1/base/b1/base.tar.gz", source(data, 12 * MiB))).rejects.toThrow(/source broke half-way/);
    expect((await readAll(await store.get("db1/base/b1/base.tar.gz"))).toString()).toBe("previous");
    expect(await store.list("")).toEqual([{ key: "db1/base/b1/base.tar.gz", size: stored(8) }]);
  });

  it("refuses keys and prefixes outside the contract", async () => {
    fresh();
    const badKeys = ["", "/abs", "../escape", "db1/../../escape", "db1//x", "db1/./x", "db1/x/", "a b", "a\\b", "ä", "db1/x~y", "..", "."];
    for (const key of badKeys) {
      await expect(store.put(key, Buffer.from("x")), key).rejects.toThrow(/invalid backup store key/);
      await expect(store.get(key), key).rejects.toThrow(/invalid backup store key/);
      await expect(store.exists(key), key).rejects.toThrow(/invalid backup store key/);
      await expect(store.delete(key), key).rejects.toThrow(/invalid backup store key/);
    }
    for (const prefix of ["/", "../", "db1/../", "/abs/", "db1//", "a b"]) {
      await expect(store.list(prefix), prefix).rejects.toThrow(/invalid backup store prefix/);
      await expect(store.deletePrefix(prefix), prefix).rejects.toThrow(/invalid backup store prefix/);
    }
    expect(await store.list("")).toEqual([]);
  });
});

describe("file store", () => {
  // Only here: S3 itself makes each PUT atomic, and s3rver's files do not.
  it("keeps one whole object when puts of the same key race", async () => {
    const store = createFileStore(path.join(scratch, "file-race"));
    const bodies = Array.from({ length: 4 }, () => randomBytes(MiB));
    await Promise.all(bodies.map((b) => store.put("db1/wal/race.gz", source(b))));
    const got = await readAll(await store.get("db1/wal/race.gz"));
    expect(bodies.some((b) => b.equals(got))).toBe(true);
    expect(await store.list("")).toEqual([{ key: "db1/wal/race.gz", size: MiB }]);
  });

  it("writes only inside its root, and removes a crash's stale temp files on list", async () => {
    const root = path.join(scratch, "file-temp");
    const store = createFileStore(root);
    await store.put("db1/wal/1.gz", Buffer.from("one"));
    expect(await readdir(path.join(root, "db1", "wal"))).toEqual(["1.gz"]);
    await expect(store.put("../outside", Buffer.from("x"))).rejects.toThrow();
    expect(await readdir(scratch)).not.toContain("outside");

    const stale = path.join(root, "db1", "wal", "2.gz~deadbeef.tmp");
    const inFlight = path.join(root, "db1", "wal", "3.gz~cafe.tmp");
    await writeFile(stale, "half");
    await writeFile(inFlight, "half");
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    await utimes(stale, twoHoursAgo, twoHoursAgo);
    expect(await store.list("db1/")).toEqual([{ key: "db1/wal/1.gz", size: 3 }]);
    expect((await readdir(path.join(root, "db1", "wal"))).sort()).toEqual(["1.gz", "3.gz~cafe.tmp"]);
  });

  it("lists an absent root as empty and needs an absolute root", async () => {
    expect(await createFileStore(path.join(scratch, "never-made")).list("")).toEqual([]);
    expect(() => createFileStore("relative/dir")).toThrow(/absolute/);
  });

  it("reports a put it cannot write with the store and key in the message", async () => {
    const root = path.join(scratch, "file-blocked");
    await mkdir(root);
    await writeFile(path.join(root, "db1"), "a file where a directory is needed");
    const store = createFileStore(root);
    await expect(store.put("db1/wal/1.gz", Buffer.from("x"))).rejects.toThrow(`backup store file://${root}: put db1/wal/1.gz failed`);
  });
});

describe("S3 store, server-side encryption", () => {
  // s3rver keeps no SSE setting, so the requests are seen on their way to it: a pass-through proxy records them.
  it("asks for BACKUP_S3_SSE (AES256 by default) on every object it creates, and for nothing with none", async () => {
    const seen: { method: string; url: string; sse: string | undefined }[] = [];
    const target = new URL(s3.endpoint);
    const proxy = createHttpServer((req, res) => {
      seen.push({ method: req.method!, url: req.url!, sse: req.headers["x-amz-server-side-encryption"] as string | undefined });
      const upstream = httpRequest(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode!, up.headers);
          up.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      const creates = () =>
        seen.filter((r) => (r.method === "PUT" && !r.url.includes("partNumber=")) || (r.method === "POST" && r.url.includes("uploads")));
      const store = openBlobStore("s3://dbaas-backups/sse", { ...s3.env, ...ENCRYPTED, BACKUP_S3_ENDPOINT: endpoint });
      await store.put("db1/wal/a.gz", Buffer.from("small: one PutObject"));
      await store.put("db1/base/b1/base.tar.gz", source(randomBytes(12 * MiB))); // multipart: CreateMultipartUpload
      expect(creates().length).toBeGreaterThanOrEqual(3); // the data key, the segment, the multipart upload
      expect(creates().every((r) => r.sse === "AES256")).toBe(true);
      seen.length = 0;
      const kms = openBlobStore("s3://dbaas-backups/sse", { ...s3.env, BACKUP_S3_ENDPOINT: endpoint, BACKUP_S3_SSE: "aws:kms" });
      await kms.put("db1/wal/b.gz", Buffer.from("x")).catch(() => {}); // s3rver may refuse KMS; the request is what counts
      expect(creates().map((r) => r.sse)).toEqual(["aws:kms"]);
      seen.length = 0;
      const none = openBlobStore("s3://dbaas-backups/sse", { ...s3.env, BACKUP_S3_ENDPOINT: endpoint, BACKUP_S3_SSE: "none" });
      await none.put("db1/wal/c.gz", Buffer.from("x"));
      expect(creates().map((r) => r.sse)).toEqual([undefined]);
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });
});

describe("S3 store, unreachable", () => {
  it("rejects promptly with a message naming the store and the cause", { timeout: 15_000 }, async () => {
    const port = await freePort();
    const store = openBlobStore("s3://dbaas-backups/p", { ...s3.env, BACKUP_S3_ENDPOINT: `http://127.0.0.1:${port}` });
    const why = new RegExp(`backup store s3://dbaas-backups/p/ at http://127.0.0.1:${port}: .*ECONNREFUSED`);
    await expect(store.put("db1/wal/1.gz", Buffer.from("x"))).rejects.toThrow(why);
    await expect(store.put("db1/base/b1/base.tar.gz", source(randomBytes(10 * MiB)))).rejects.toThrow(why);
    await expect(store.list("db1/")).rejects.toThrow(why);
    await expect(store.get("db1/wal/1.gz")).rejects.toThrow(why);
    await expect(store.exists("db1/wal/1.gz")).rejects.toThrow(why);
  });

  // A store that takes the connection and then says nothing (what SIGSTOP does to s3rver in the end-to-end
  // outage test): the idle timeout (BACKUP_S3_IDLE_TIMEOUT_MS) is what ends the request, twice (the SDK's retry).
  it("gives a stalled store up after its idle timeout, naming it", { timeout: 15_000 }, async () => {
    const held: Socket[] = [];
    const silent = createServer((socket) => {
      held.push(socket);
      socket.on("error", () => {});
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as AddressInfo).port;
    try {
      const store = openBlobStore("s3://dbaas-backups/p", {
        ...s3.env,
        BACKUP_S3_ENDPOINT: `http://127.0.0.1:${port}`,
        BACKUP_S3_IDLE_TIMEOUT_MS: "300",
      });
      await expect(store.put("db1/wal/1.gz", Buffer.from("x"))).rejects.toThrow(/put db1\/wal\/1.gz failed: .*timed out after 300 ms/);
      expect(held.length).toBe(2);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  it("reports a missing bucket as an error, not as a missing object", async () => {
    const store = openBlobStore("s3://no-such-bucket/p", s3.env);
    await expect(store.get("db1/wal/1.gz")).rejects.toThrow(/NoSuchBucket/);
    await expect(store.put("db1/wal/1.gz", Buffer.from("x"))).rejects.toThrow(/NoSuchBucket/);
  });
});

describe("openBlobStore", () => {
  it("is given file://<DBAAS_DATA_DIR>/backups unless BACKUP_STORE_URL says otherwise (./.dbaas without a data dir)", () => {
    const required = {
      DATABASES_URL: "http://127.0.0.1:1",
      INTERNAL_AUTH_SECRET: "s",
      AGENT_REPLICATION_SECRET: "r",
      BACKUP_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    };
    expect(readConfig({ ...required, DBAAS_DATA_DIR: "/var/lib/dbaas" }).backupStoreUrl).toBe("file:///var/lib/dbaas/backups");
    expect(readConfig(required).backupStoreUrl).toBe(pathToFileURL(path.resolve(".dbaas", "backups")).href);
    expect(readConfig({ ...required, BACKUP_STORE_URL: "s3://b-1/x" }).backupStoreUrl).toBe("s3://b-1/x");
    expect(openBlobStore(readConfig({ ...required, DBAAS_DATA_DIR: "/var/lib/dbaas" }).backupStoreUrl, {}).description).toBe(
      "file:///var/lib/dbaas/backups",
    );
  });

  it("needs a 32-byte BACKUP_ENCRYPTION_KEY, takes BACKUP_S3_SSE AES256 / aws:kms / none, and encrypts with the key", () => {
    const required = { DATABASES_URL: "http://127.0.0.1:1", INTERNAL_AUTH_SECRET: "s", AGENT_REPLICATION_SECRET: "r" };
    expect(() => readConfig(required)).toThrow(/BACKUP_ENCRYPTION_KEY/);
    for (const bad of ["short", randomBytes(16).toString("base64"), randomBytes(33).toString("base64"), "not base64 at all!"]) {
      expect(() => readConfig({ ...required, BACKUP_ENCRYPTION_KEY: bad }), bad).toThrow(ConfigError);
      expect(() => readConfig({ ...required, BACKUP_ENCRYPTION_KEY: bad }), bad).not.toThrow(bad);
    }
    const key = randomBytes(32).toString("base64");
    expect(() => readConfig({ ...required, BACKUP_ENCRYPTION_KEY: key, BACKUP_ENCRYPTION_KEY_PREVIOUS: "x" })).toThrow(
      /BACKUP_ENCRYPTION_KEY_PREVIOUS/,
    );
    expect(() => readConfig({ ...required, BACKUP_ENCRYPTION_KEY: key, BACKUP_S3_SSE: "aes" })).toThrow(/BACKUP_S3_SSE/);
    for (const sse of ["AES256", "aws:kms", "none", ""]) readConfig({ ...required, BACKUP_ENCRYPTION_KEY: key, BACKUP_S3_SSE: sse });
    expect(openBlobStore("file:///var/lib/dbaas/backups", { BACKUP_ENCRYPTION_KEY: key }).description).toMatch(
      /^file:\/\/\/var\/lib\/dbaas\/backups \(encrypted, master key [0-9a-f]{16}\)$/,
    );
  });

  it("opens file:// and s3:// URLs", () => {
    expect(openBlobStore("file:///var/lib/dbaas/backups", {}).description).toBe("file:///var/lib/dbaas/backups");
    expect(openBlobStore("s3://my-bucket/dbaas/prod", {}).description).toBe("s3://my-bucket/dbaas/prod/");
    expect(openBlobStore("s3://my-bucket", { BACKUP_S3_ENDPOINT: "http://minio:9000" }).description).toBe(
      "s3://my-bucket/ at http://minio:9000",
    );
  });

  it("refuses a bad BACKUP_STORE_URL with a ConfigError naming it", () => {
    for (const url of [
      "",
      "backups",
      "file://relative/dir",
      "http://host/x",
      "s3://",
      "s3://Bad_Bucket/x",
      "s3://b-1/a%20b",
      "s3://b-1/x?y=1",
    ]) {
      expect(() => openBlobStore(url, {}), url).toThrow(ConfigError);
      expect(() => openBlobStore(url, {}), url).toThrow(/BACKUP_STORE_URL/);
    }
    expect(() => openBlobStore("s3://b-1/x", { BACKUP_S3_ENDPOINT: "minio:9000" })).toThrow(/BACKUP_S3_ENDPOINT/);
    expect(() => openBlobStore("s3://b-1/x", { AWS_ACCESS_KEY_ID: "k" })).toThrow(/AWS_SECRET_ACCESS_KEY/);
    for (const bad of ["0", "-5", "soon", "1.5"]) {
      expect(() => openBlobStore("s3://b-1/x", { BACKUP_S3_IDLE_TIMEOUT_MS: bad }), bad).toThrow(/BACKUP_S3_IDLE_TIMEOUT_MS/);
    }
  });
});
