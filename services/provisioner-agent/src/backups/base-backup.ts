import { constants as fsConstants } from "node:fs";
import { mkdir, open } from "node:fs/promises";
import path from "node:path";
import { pipeline, Transform } from "node:stream";
import { constants, createGzip } from "node:zlib";
import type pg from "pg";
import { type AgentConnection, agentClient, assertAnsweringServer, type ServerFiles, withAgentSession } from "../instance-access.ts";
import { removeTree, UnsafePathError } from "../safe-fs.ts";
import type { BlobStore } from "./blob-store.ts";
import { type BackupRecord, baseTarKey, manifestKey, recordKey } from "./layout.ts";
import { tarWithout } from "./tar-filter.ts";
import { lastSegmentNeeded, parseLsn, segnoOfLsn } from "./wal.ts";

/** application_name of the replication connection: how a later attempt finds (and ends) one a crash left behind. */
const BACKUP_APP = "dbaas-backup";
const BACKUP_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;
/**
 * Members of base.tar that never reach the store: the server's private key (a
 * restore or a replica gets its own certificate at its first start).
 */
export const LEFT_OUT = ["server.key"];

export interface BaseBackupOptions {
  store: BlobStore;
  databaseId: string;
  backupId: string;
  /** PostgreSQL major of the instance (goes into the record; a restore needs the same). */
  version: string;
  /** The agent's session on the instance's server (InstanceAccess.agentConnection). */
  connection: AgentConnection;
  /** `<AGENT_DATA_DIR>/backup-staging`: the server writes base.tar and the manifest below it. */
  stagingRoot: string;
  /** As the instance's server: it owns its staging directory. */
  server: ServerFiles;
  /** Resolves once every WAL segment from `from` to `to` is in the store. */
  waitForWal: (from: number, to: number, signal: AbortSignal) => Promise<void>;
  now: () => Date;
  signal: AbortSignal;
}

/** The database's staging directory; removing it is how leftovers of any attempt go. */
export const stagingDirOf = (stagingRoot: string, databaseId: string) => path.join(stagingRoot, databaseId);

/**
 * Ends what an earlier attempt left running (a walsender still writing a
 * backup for an agent that was killed) and removes its staging files.
 */
export async function clearBackupLeftovers(o: Pick<BaseBackupOptions, "connection" | "stagingRoot" | "databaseId">) {
  await withAgentSession(o.connection, (c) =>
    c.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'walsender' AND application_name = $1", [
      BACKUP_APP,
    ]),
  );
  await removeTree(stagingDirOf(o.stagingRoot, o.databaseId));
}

interface Position {
  lsn: string;
  timeline: number;
}

/** BASE_BACKUP answers its start and end positions as one-row result sets with columns recptr and tli. */
function positions(result: unknown): { start: Position; stop: Position } {
  const sets = (Array.isArray(result) ? result : [result]) as pg.QueryResult[];
  const found = sets
    .filter((r) => r.fields?.[0]?.name === "recptr" && r.rows.length === 1)
    .map((r) => ({ lsn: String(r.rows[0].recptr), timeline: Number(r.rows[0].tli) }));
  if (found.length < 2) throw new Error("BASE_BACKUP did not report its start and end positions");
  return { start: found[0]!, stop: found[found.length - 1]! };
}

/** base.tar without LEFT_OUT, through gzip into the store (which encrypts it); resolves with the compressed size. */
/**
 * What the server wrote into its staging directory (which its user can write): opened without following a link
 * and only if a regular file of `uid`, so the agent never uploads another file (the CA key, a neighbour's
 * staging) into this database's backups, where a restore would hand it to the customer.
 */
async function openStaged(file: string, uid: number) {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ELOOP") throw new UnsafePathError(`refusing to upload ${file}: it is a symbolic link`);
    throw e;
  }
  const st = await fh.stat();
  if (!st.isFile() || st.uid !== uid) {
    await fh.close();
    throw new UnsafePathError(
      `refusing to upload ${file}: ${st.isFile() ? `owned by uid ${st.uid}, not the server's ${uid}` : "not a regular file"}`,
    );
  }
  return { fh, size: st.size };
}

async function uploadCompressed(store: BlobStore, key: string, file: string, uid: number): Promise<number> {
  const { fh } = await openStaged(file, uid);
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      cb(null, chunk);
    },
  });
  // Speed over ratio: the backup's duration is what a customer waits for.
  const body = pipeline(fh.createReadStream(), tarWithout(LEFT_OUT), createGzip({ level: constants.Z_BEST_SPEED }), counter, () => {});
  try {
    await store.put(key, body);
  } finally {
    await fh.close().catch(() => {});
  }
  return size;
}

/**
 * One base backup of a running instance into the store. The server writes
 * base.tar and backup_manifest into a staging directory (BASE_BACKUP TARGET
 * 'server', on a replication connection over the unix socket); they are
 * uploaded, the WAL up to the backup's end is waited for, and only then is
 * the record written: its presence is what "completed" means, so nothing
 * half-written is ever listed. Any failure (or a kill) leaves at most
 * unreferenced files that the next attempt overwrites.
 */
export async function takeBaseBackup(o: BaseBackupOptions): Promise<BackupRecord> {
  if (!BACKUP_ID_RE.test(o.backupId)) throw new Error(`invalid backup id ${JSON.stringify(o.backupId)}`);
  await clearBackupLeftovers(o);
  const dbStaging = stagingDirOf(o.stagingRoot, o.databaseId);
  await mkdir(o.stagingRoot, { recursive: true, mode: 0o711 });
  await o.server.makeDir(dbStaging);
  // The server creates the target directory itself and refuses one that is not empty.
  const target = path.join(dbStaging, o.backupId);
  const client = agentClient(o.connection, { replication: true, applicationName: BACKUP_APP });
  const abort = () => void client.end().catch(() => {});
  o.signal.addEventListener("abort", abort, { once: true });
  try {
    o.signal.throwIfAborted();
    const startedAt = o.now();
    await client.connect();
    await assertAnsweringServer(client, o.connection);
    const result = await client.query(
      `BASE_BACKUP (LABEL '${o.backupId}', TARGET 'server', TARGET_DETAIL ${client.escapeLiteral(target)}, ` +
        "CHECKPOINT 'fast', WAIT true, MANIFEST 'yes')",
    );
    const stoppedAt = o.now();
    await client.end();
    const { start, stop } = positions(result);
    o.signal.throwIfAborted();
    const tarSize = await uploadCompressed(o.store, baseTarKey(o.databaseId, o.backupId), path.join(target, "base.tar"), o.server.uid);
    const manifest = await openStaged(path.join(target, "backup_manifest"), o.server.uid);
    try {
      await o.store.put(manifestKey(o.databaseId, o.backupId), await manifest.fh.readFile());
    } finally {
      await manifest.fh.close();
    }
    const manifestSize = manifest.size;
    // Restorable only with the WAL from its start to its end.
    await o.waitForWal(segnoOfLsn(parseLsn(start.lsn)), lastSegmentNeeded(parseLsn(stop.lsn)), o.signal);
    const record: BackupRecord = {
      backupId: o.backupId,
      databaseId: o.databaseId,
      version: o.version,
      startLsn: start.lsn,
      stopLsn: stop.lsn,
      timeline: stop.timeline,
      startedAt: startedAt.toISOString(),
      stoppedAt: stoppedAt.toISOString(),
      sizeBytes: tarSize + manifestSize,
    };
    await o.store.put(recordKey(o.databaseId, o.backupId), Buffer.from(JSON.stringify(record, null, 2)));
    return record;
  } finally {
    o.signal.removeEventListener("abort", abort);
    await client.end().catch(() => {});
    await removeTree(dbStaging);
  }
}
