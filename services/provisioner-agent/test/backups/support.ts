import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { type Clock, createLogger, systemClock } from "@dbaas/kit";
import { type DatabaseBackups, DesiredState, type InstanceSpec, InstanceSpecSchema } from "@dbaas/proto/agent";
import pg from "pg";
import { type BackupManager, type BackupSettings, createBackupManager } from "../../src/backups/backup-manager.ts";
import type { BlobStore } from "../../src/backups/blob-store.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { walSpoolRoot } from "../../src/instances/host.ts";
import { createInstanceManager, type InstanceManager } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { resolveRunAs } from "../../src/instances/run-as.ts";
import type { InstanceRuntime } from "../../src/runtime.ts";
import { freePort, randomPassword, scramVerifier, tempDataDir } from "../instances/helpers.ts";

/** Real instances, a real file store and the backup manager over them, as the agent wires them. */
export interface Fixture {
  dataDir: string;
  storeDir: string;
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

export async function startFixture(
  tag: string,
  major: string,
  opts: { store?: BlobStore; storeDir?: string; replicationSecret?: string } = {},
): Promise<Fixture> {
  const dataDir = await tempDataDir(tag);
  const storeDir = opts.storeDir ?? path.join(dataDir, "..", `${path.basename(dataDir)}-store`);
  await mkdir(storeDir, { recursive: true });
  const store = opts.store ?? createFileStore(storeDir);
  const m = createInstanceManager({
    dataDir,
    agentId: `test-${tag}`,
    store,
    ...(opts.replicationSecret ? { replicationSecret: opts.replicationSecret } : {}),
  });
  const runtime = createLocalProcessRuntime(m);
  const id = `db-${tag}`;
  const port = await freePort();
  const spec = create(InstanceSpecSchema, {
    databaseId: id,
    version: major,
    tier: "micro",
    port,
    desiredState: DesiredState.RUNNING,
    scramVerifier: scramVerifier(randomPassword()),
    generation: 1n,
    credentialsGeneration: 1n,
    host: `${id}.example.test`,
  });
  await runtime.create(id, { version: major });
  await runtime.start(id, { port, tier: "micro", hostname: spec.host, scramVerifier: spec.scramVerifier });
  const sql = async (text: string) => {
    const c = new pg.Client({ host: m.socketDir, port, user: "dbaas_agent", database: "postgres" });
    c.on("error", () => {});
    await c.connect();
    try {
      return (await c.query(text)).rows;
    } finally {
      await c.end();
    }
  };
  return {
    dataDir,
    storeDir,
    store,
    m,
    runtime,
    id,
    port,
    spec,
    spoolDir: path.join(walSpoolRoot(dataDir), id),
    sql,
    async close() {
      await m.stopAll().catch(() => {});
      await rm(dataDir, { recursive: true, force: true });
      await rm(storeDir, { recursive: true, force: true });
      await rm(m.socketDir, { recursive: true, force: true });
    },
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
    socketDir: fx.m.socketDir,
    dataDir: fx.dataDir,
    spoolRoot: walSpoolRoot(fx.dataDir),
    runAs: resolveRunAs(),
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

export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 30_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`${what} not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Writes rows and switches to a new WAL segment; resolves with the name of the segment finished. */
export async function writeAndSwitch(fx: Fixture, rows = 1000): Promise<string> {
  await fx.sql(`CREATE TABLE IF NOT EXISTS t (x int); INSERT INTO t SELECT generate_series(1, ${rows})`);
  return String((await fx.sql("SELECT pg_walfile_name(pg_switch_wal()) AS seg"))[0]!.seg);
}
