/**
 * A BlobStore that encrypts every object it puts (encryption.ts) under a data
 * key of the object's database (its key's first segment), and opens what it
 * gets: sealed objects under whichever data key their header names, objects
 * written before encryption as they are.
 *
 * Data keys are objects of their own, `<database id>/keys/<data key id>.json`
 * (wrapped under the master key), never overwritten with another key: every
 * agent that writes for a database and finds no data key it can open makes
 * one of its own, so two agents racing never lose one. `list` hides them
 * (they are not backups); `deletePrefix("<id>/")` — a purge — deletes them
 * with the data, which makes whatever copy of the data survives elsewhere
 * unreadable. A data key found wrapped under a previous master key
 * (BACKUP_ENCRYPTION_KEY_PREVIOUS) is re-wrapped under the current one when it
 * is first used; `rewrapDataKeys` does them all at once (rotation,
 * services/provisioner-agent/README.md).
 */
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream";
import { assertValidKey, type BlobInfo, BlobNotFoundError, type BlobStore } from "./blob-store.ts";
import {
  BackupDecryptionError,
  KEY_BYTES,
  type Keyring,
  newDataKeyId,
  openStream,
  sealBuffer,
  sealStream,
  unwrapDataKey,
  type WrappedDataKey,
  wrapDataKey,
} from "./encryption.ts";

export const dataKeyPrefix = (databaseId: string) => `${databaseId}/keys/`;
export const dataKeyObject = (databaseId: string, dataKeyId: string) => `${databaseId}/keys/${dataKeyId}.json`;
const DATA_KEY_OBJECT = /^([^/]+)\/keys\/([A-Za-z0-9_-]+)\.json$/;

const databaseOf = (key: string) => key.slice(0, key.indexOf("/") === -1 ? key.length : key.indexOf("/"));

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function readWrapped(inner: BlobStore, key: string): Promise<WrappedDataKey> {
  const text = (await readAll(await inner.get(key))).toString("utf8");
  try {
    return JSON.parse(text) as WrappedDataKey;
  } catch {
    throw new BackupDecryptionError(`data key object ${key} is not JSON`);
  }
}

export interface EncryptedStoreOptions {
  /** Told when a data key is made or re-wrapped (never the key itself). */
  log?: (msg: string) => void;
}

export function createEncryptedStore(inner: BlobStore, keyring: Keyring, opts: EncryptedStoreOptions = {}): BlobStore {
  const log = opts.log ?? (() => {});
  /** The data key this agent writes a database's objects under. */
  const writing = new Map<string, Promise<{ id: string; key: Buffer }>>();
  /** Data keys by `<database>/<id>`, as read. */
  const reading = new Map<string, Promise<Buffer>>();

  /** Opens a wrapped data key; one under a previous master key is re-wrapped under the current one on the way. */
  async function open(databaseId: string, w: WrappedDataKey): Promise<Buffer> {
    const { dataKey, master } = unwrapDataKey(keyring, w, databaseId);
    if (master.id !== keyring.current.id) {
      await inner.put(
        dataKeyObject(databaseId, w.dataKeyId),
        Buffer.from(JSON.stringify(wrapDataKey(keyring.current, databaseId, w.dataKeyId, dataKey, new Date(w.createdAt)), null, 2)),
      );
      log(`re-wrapped data key ${w.dataKeyId} of ${databaseId} from master key ${master.id} to ${keyring.current.id}`);
    }
    return dataKey;
  }

  async function chooseWriteKey(databaseId: string): Promise<{ id: string; key: Buffer }> {
    for (const { key } of await inner.list(dataKeyPrefix(databaseId))) {
      const m = DATA_KEY_OBJECT.exec(key);
      if (!m || m[1] !== databaseId) continue;
      try {
        const w = await readWrapped(inner, key);
        return { id: w.dataKeyId, key: await open(databaseId, w) };
      } catch (err) {
        if (!(err instanceof BackupDecryptionError)) throw err;
        log(`cannot use data key object ${key}: ${err.message}`);
      }
    }
    const id = newDataKeyId();
    const key = randomBytes(KEY_BYTES);
    await inner.put(dataKeyObject(databaseId, id), Buffer.from(JSON.stringify(wrapDataKey(keyring.current, databaseId, id, key), null, 2)));
    log(`made data key ${id} for ${databaseId} under master key ${keyring.current.id}`);
    return { id, key };
  }

  function writeKey(databaseId: string): Promise<{ id: string; key: Buffer }> {
    let p = writing.get(databaseId);
    if (!p) {
      p = chooseWriteKey(databaseId);
      writing.set(databaseId, p);
      p.catch(() => writing.delete(databaseId));
    }
    return p;
  }

  function readKey(databaseId: string, dataKeyId: string): Promise<Buffer> {
    const cacheKey = `${databaseId}/${dataKeyId}`;
    let p = reading.get(cacheKey);
    if (!p) {
      p = (async () => {
        let w: WrappedDataKey;
        try {
          w = await readWrapped(inner, dataKeyObject(databaseId, dataKeyId));
        } catch (err) {
          if (err instanceof BlobNotFoundError)
            throw new BackupDecryptionError(`data key ${dataKeyId} of ${databaseId} is not in the store`);
          throw err;
        }
        if (w.dataKeyId !== dataKeyId) throw new BackupDecryptionError(`data key object of ${dataKeyId} names ${w.dataKeyId}`);
        return open(databaseId, w);
      })();
      reading.set(cacheKey, p);
      p.catch(() => reading.delete(cacheKey));
    }
    return p;
  }

  const isKeyObject = (key: string) => DATA_KEY_OBJECT.test(key);
  const refuseKeyObject = (key: string) => {
    assertValidKey(key);
    if (isKeyObject(key)) throw new Error(`${key} is a data key's place in the backup store, not an object`);
  };

  return {
    description: `${inner.description} (encrypted, master key ${keyring.current.id})`,

    async put(key, body) {
      refuseKeyObject(key);
      const databaseId = databaseOf(key);
      const { id, key: dataKey } = await writeKey(databaseId);
      const params = { dataKeyId: id, dataKey, name: key };
      if (Buffer.isBuffer(body)) return inner.put(key, sealBuffer(params, body));
      const source = body instanceof Readable ? body : createReadStream(body.path);
      // The source's error reaches the sealed stream (and so the inner put); the source is destroyed with it.
      const sealed = pipeline(source, sealStream(params), () => {});
      await inner.put(key, sealed);
    },

    async get(key) {
      refuseKeyObject(key);
      const databaseId = databaseOf(key);
      const raw = await inner.get(key);
      return pipeline(
        raw,
        openStream(key, (dataKeyId) => readKey(databaseId, dataKeyId)),
        () => {},
      );
    },

    async exists(key) {
      refuseKeyObject(key);
      return inner.exists(key);
    },

    async list(prefix): Promise<BlobInfo[]> {
      return (await inner.list(prefix)).filter((o) => !isKeyObject(o.key));
    },

    async delete(key) {
      refuseKeyObject(key);
      await inner.delete(key);
    },

    async deletePrefix(prefix) {
      await inner.deletePrefix(prefix);
      for (const id of [...writing.keys()]) if (`${id}/`.startsWith(prefix)) writing.delete(id);
      for (const k of [...reading.keys()]) if (k.startsWith(prefix)) reading.delete(k);
    },
  };
}

export interface RewrapResult {
  /** Data keys now wrapped under the current master key that were not before. */
  rewrapped: number;
  /** Already under the current key. */
  current: number;
  /** Not opened by any key of the keyring (listed with why). */
  failed: { key: string; error: string }[];
}

/**
 * Re-wraps every data key in the store under the keyring's current master
 * key (a rotation: run with the new key as BACKUP_ENCRYPTION_KEY and the old
 * one in BACKUP_ENCRYPTION_KEY_PREVIOUS). Reads and rewrites only the small
 * key objects, never the backups. Idempotent; safe beside running agents
 * (they re-wrap the same way, and each put is atomic).
 */
export async function rewrapDataKeys(inner: BlobStore, keyring: Keyring): Promise<RewrapResult> {
  const result: RewrapResult = { rewrapped: 0, current: 0, failed: [] };
  for (const { key } of await inner.list("")) {
    const m = DATA_KEY_OBJECT.exec(key);
    if (!m) continue;
    const databaseId = m[1]!;
    try {
      const w = await readWrapped(inner, key);
      if (w.masterKeyId === keyring.current.id) {
        unwrapDataKey(keyring, w, databaseId); // still opens: an id match alone proves nothing
        result.current++;
        continue;
      }
      const { dataKey } = unwrapDataKey(keyring, w, databaseId);
      await inner.put(
        key,
        Buffer.from(JSON.stringify(wrapDataKey(keyring.current, databaseId, w.dataKeyId, dataKey, new Date(w.createdAt)), null, 2)),
      );
      result.rewrapped++;
    } catch (err) {
      if (err instanceof BlobNotFoundError) continue; // purged meanwhile
      result.failed.push({ key, error: (err as Error).message });
    }
  }
  return result;
}
