import path from "node:path";
import { type Clock, createLogger, systemClock } from "@dbaas/kit";
import type { DatabaseBackups, InstanceSpec } from "@dbaas/proto/agent";
import { type BackupManager, type BackupSettings, createBackupManager } from "../../src/backups/backup-manager.ts";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { createEncryptedStore } from "../../src/backups/encrypted-store.ts";
import { type Keyring, keyringFromEnv } from "../../src/backups/encryption.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import type { InstanceManager } from "../../src/instances/instance-manager.ts";
import type { InstanceRuntime } from "../../src/runtime.ts";
import { startHost, startInstance, tempDataDir } from "../support/fixture.ts";

export { waitFor } from "../support/fixture.ts";

/** The master key of the tests' stores, as an agent's BACKUP_ENCRYPTION_KEY (and its environment form). */
export const TEST_BACKUP_ENV = { BACKUP_ENCRYPTION_KEY: "ZGJhYXMtYmFja3VwLXRlc3QtbWFzdGVyLWtleS0zMmI=" };
export const TEST_KEYRING = keyringFromEnv(TEST_BACKUP_ENV) as Keyring;

/** Real instances, a real file store and the backup manager over them, as the agent wires them. */
export interface Fixture {
  dataDir: string;
  storeDir: string;
  /** Encrypted under TEST_KEYRING, as the agent's is (unless the test gave its own). */
  store: BlobStore;
  m: InstanceManager;
  runtime: InstanceRuntime;
  /** A running instance of `major` with id `id`, and its spec. */
  id: string;
  port: number;
  spec: InstanceSpec;
  spoolDir: string;
  /** Runs SQL as the agent's superuser over the instance's socket. */
  sql(text: string): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

/**
 * A test host (support/fixture.ts) whose instances restore from `store` (an
 * encrypted file store in a directory of its own unless given), with instance `db-<tag>`
 * of `major` running on it.
 */
export async function startFixture(
  tag: string,
  major: string,
  opts: { store?: BlobStore; storeDir?: string; replicationSecret?: string; archiveTimeoutS?: number } = {},
): Promise<Fixture> {
  const storeDir = opts.storeDir ?? (await tempDataDir(`${tag}-store`));
  const store = opts.store ?? createEncryptedStore(createFileStore(storeDir), TEST_KEYRING);
  const host = await startHost(tag, {
    store,
    removeOnClose: [storeDir],
    ...(opts.replicationSecret ? { replicationSecret: opts.replicationSecret } : {}),
    ...(opts.archiveTimeoutS ? { archiveTimeoutS: opts.archiveTimeoutS } : {}),
  });
  const { id, port, spec } = await startInstance(host, `db-${tag}`, { major });
  return {
    dataDir: host.dataDir,
    storeDir,
    store,
    m: host.m,
    runtime: host.runtime,
    id,
    port,
    spec,
    spoolDir: path.join(host.runtime.walSpoolRoot, id),
    sql: (text) => host.asAgent(id, text),
    close: () => host.close(),
  };
}

export const TEST_SETTINGS: BackupSettings = { maxSpoolBytes: 1024 ** 3, retentionDays: 7, pruneIntervalMs: 3_600_000, concurrency: 1 };

/** The backup manager the control loop builds, with fast loops; `reports` collects every snapshot it asked to send. */
export function managerFor(
  fx: Fixture,
  opts: { settings?: Partial<BackupSettings>; clock?: Clock; store?: BlobStore } = {},
): { manager: BackupManager; reports: DatabaseBackups[][] } {
  const reports: DatabaseBackups[][] = [];
  const manager: BackupManager = createBackupManager({
    store: opts.store ?? fx.store,
    runtime: fx.runtime,
    dataDir: fx.dataDir,
    log: createLogger("backups-test"),
    clock: opts.clock ?? systemClock,
    settings: { ...TEST_SETTINGS, ...opts.settings },
    notify: () => reports.push(manager.snapshot()),
    tickMs: 300,
    archiveIntervalMs: 200,
    retryDelayMs: 100,
  });
  return { manager, reports };
}

/** The agent's shutdown order: no more backups, instances stop (archiving their last WAL), the uploader's last pass. */
export async function shutdown(manager: BackupManager | undefined, fx: Fixture | undefined): Promise<void> {
  await manager?.quiesce();
  await fx?.m.stopAll().catch(() => {});
  await manager?.stop();
  await fx?.close();
}

/** The manager's current view of one database. */
export function view(manager: BackupManager, id: string): DatabaseBackups | undefined {
  return manager.snapshot().find((d) => d.databaseId === id);
}

/** Writes rows and switches to a new WAL segment; resolves with the name of the segment finished. */
export async function writeAndSwitch(fx: Fixture, rows = 1000): Promise<string> {
  await fx.sql(`CREATE TABLE IF NOT EXISTS t (x int); INSERT INTO t SELECT generate_series(1, ${rows})`);
  return String((await fx.sql("SELECT pg_walfile_name(pg_switch_wal()) AS seg"))[0]!.seg);
}
