import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { createLogger } from "@dbaas/kit";
import {
  DesiredState,
  type InstanceObservation,
  type InstanceSpec,
  InstanceSpecSchema,
  ObservedState,
  type ReplicaSource,
  ReplicaSourceSchema,
} from "@dbaas/proto/agent";
import pg from "pg";
import { createAppliedStore } from "../../src/applied-state.ts";
import { createInstanceManager, type InstanceManager, type InstanceManagerOptions } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { createReconciler, type Reconciler } from "../../src/reconciler.ts";
import type { InstanceRuntime, InstanceSettings } from "../../src/runtime.ts";
import { freePort, randomPassword, scramVerifier, tempDataDir } from "../instances/helpers.ts";

// The one set-up of the agent's tests on real instances: a fresh data
// directory with an instance manager and the local-process runtime over it
// (as the agent wires them), instances started on free ports with a known
// password, clients that log in as customers do, the reconciler, a poll, and
// a tear-down that leaves no server and no directory behind. Each test file
// keeps only what is its own.

export { freePort, randomPassword, scramVerifier, tempDataDir };

/** What a test host is built with: the instance manager's options but its data directory and agent id. */
export type HostOptions = Omit<InstanceManagerOptions, "dataDir" | "agentId"> & {
  /** More directories `close` removes (a file store's, say). */
  removeOnClose?: readonly string[];
};

/** One agent's instance side on a fresh data directory. */
export interface TestHost {
  /** The data directory, `dbaas-it-<tag>-*` under the system's temporary directory. */
  readonly dataDir: string;
  /** The instance manager over `dataDir`; its agent id is `test-<tag>`. */
  readonly m: InstanceManager;
  /** The local-process runtime over `m`: what the reconciler and the backup manager are given. */
  readonly runtime: InstanceRuntime;
  /** Runs SQL as the agent's superuser on a running instance, over the socket its postmaster.pid names (as the agent does). */
  asAgent(id: string, sql: string): Promise<Record<string, unknown>[]>;
  /** The pid of the instance's postmaster, from its postmaster.pid. */
  postmasterPid(id: string): Promise<number>;
  /** Stops every instance and removes the data, socket and `removeOnClose` directories. Never throws; safe to call twice. */
  close(): Promise<void>;
}

/** A fresh data directory tagged `tag`, an instance manager (agent id `test-<tag>`) and its runtime; nothing started yet. */
export async function startHost(tag: string, opts: HostOptions = {}): Promise<TestHost> {
  const { removeOnClose = [], ...managerOptions } = opts;
  const dataDir = await tempDataDir(tag);
  const m = createInstanceManager({ dataDir, agentId: `test-${tag}`, ...managerOptions });
  const runtime = createLocalProcessRuntime(m);
  return {
    dataDir,
    m,
    runtime,
    asAgent: (id, sql) => agentSql(dataDir, id, sql),
    postmasterPid: (id) => postmasterPid(dataDir, id),
    async close() {
      await m.stopAll().catch(() => {});
      for (const dir of [dataDir, m.socketDir, ...removeOnClose]) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** postmaster.pid of instance `id` under `dataDir`, line by line: pid, data dir, start time, port, socket dir, … */
async function pidFile(dataDir: string, id: string): Promise<string[]> {
  return (await readFile(path.join(dataDir, "instances", id, "postmaster.pid"), "utf8")).split("\n");
}

/** `TestHost.asAgent` for any data directory: SQL as the agent's superuser over the socket instance `id`'s postmaster.pid names. */
export async function agentSql(dataDir: string, id: string, sql: string): Promise<Record<string, unknown>[]> {
  const pf = await pidFile(dataDir, id);
  const c = new pg.Client({ host: pf[4]!.trim(), port: Number(pf[3]), user: "dbaas_agent", database: "postgres" });
  c.on("error", () => {});
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

/** `TestHost.postmasterPid` for any data directory: the pid in instance `id`'s postmaster.pid. */
export async function postmasterPid(dataDir: string, id: string): Promise<number> {
  return Number((await pidFile(dataDir, id))[0]);
}

/** A spec's fields: the database id and port, and any others that differ from `instanceSpec`'s defaults. */
export type SpecFields = MessageInitShape<typeof InstanceSpecSchema> & { databaseId: string; port: number };

/**
 * An instance spec as the databases service sends it: PostgreSQL 17, tier
 * micro, running, generation and credentials generation 1, host
 * `<databaseId>.example.test`; `fields` override any of them.
 */
export function instanceSpec(fields: SpecFields): InstanceSpec {
  return create(InstanceSpecSchema, {
    version: "17",
    tier: "micro",
    desiredState: DesiredState.RUNNING,
    generation: 1n,
    credentialsGeneration: 1n,
    host: `${fields.databaseId}.example.test`,
    ...fields,
  });
}

/** An instance `startInstance` created and started. */
export interface TestInstance {
  id: string;
  /** Its published port, free when it was picked. */
  port: number;
  /** dbadmin's password (its verifier is in `settings` and `spec`). */
  password: string;
  /** What it was started with: the port, tier, hostname and the password's verifier. */
  settings: InstanceSettings;
  /** The same instance as a spec (`instanceSpec` with these settings and `major`). */
  spec: InstanceSpec;
}

/**
 * Creates instance `id` through the host's runtime and starts it on a free
 * port: PostgreSQL `major` (17), tier micro, hostname `<id>.example.test`,
 * a random password unless given.
 */
export async function startInstance(
  host: TestHost,
  id: string,
  opts: { major?: string; tier?: string; hostname?: string; password?: string } = {},
): Promise<TestInstance> {
  const { major = "17", tier = "micro", hostname = `${id}.example.test`, password = randomPassword() } = opts;
  const port = await freePort();
  const settings: InstanceSettings = { port, tier, hostname, scramVerifier: scramVerifier(password) };
  const spec = instanceSpec({ databaseId: id, version: major, port, tier, host: hostname, scramVerifier: settings.scramVerifier });
  await host.runtime.create(id, { version: major });
  await host.runtime.start(id, settings);
  return { id, port, password, settings, spec };
}

/**
 * A client logged in to a published port as a customer: dbadmin (or `user`)
 * on defaultdb over TLS, not verifying the certificate unless `ssl` says how;
 * 5 s to connect. A client that fails to connect is closed.
 */
export async function connect(
  port: number,
  password: string,
  opts: { ssl?: pg.ClientConfig["ssl"]; user?: string } = {},
): Promise<pg.Client> {
  const c = new pg.Client({
    host: "127.0.0.1",
    port,
    user: opts.user ?? "dbadmin",
    password,
    database: "defaultdb",
    ssl: opts.ssl ?? { rejectUnauthorized: false },
    connectionTimeoutMillis: 5000,
  });
  c.on("error", () => {});
  try {
    await c.connect();
  } catch (e) {
    await c.end().catch(() => {});
    throw e;
  }
  return c;
}

/** One statement (or several) as dbadmin over TLS, in a connection of its own; resolves with the last result's rows. */
export async function query(port: number, password: string, sql: string): Promise<Record<string, unknown>[]> {
  const c = await connect(port, password);
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

/**
 * Polls `probe` every 20 ms until it gives something other than `undefined`
 * or `false`, and resolves with that; rejects with "`what` not met within
 * `ms` ms" after `ms` (30 s). A probe that throws ends the wait with its error.
 */
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
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The agent's reconciler over the host's runtime and applied-state files (in `dataDir`), reporting each observation to `report`. */
export function reconcilerFor(
  host: Pick<TestHost, "dataDir" | "runtime">,
  opts: {
    report?: (o: InstanceObservation) => void;
    concurrency?: number;
    purgeBackups?: (id: string) => Promise<void>;
    discardBackups?: (id: string) => Promise<void>;
  } = {},
): Reconciler {
  return createReconciler({
    runtime: host.runtime,
    applied: createAppliedStore(host.dataDir),
    log: createLogger("agent-test"),
    concurrency: opts.concurrency ?? 4,
    report: opts.report ?? (() => {}),
    ...(opts.purgeBackups && { purgeBackups: opts.purgeBackups }),
    ...(opts.discardBackups && { discardBackups: opts.discardBackups }),
  });
}

/**
 * Resolves with `reconciler`'s observation of `id` once it is running at
 * `generation` or later; rejects at once if it is reported failed, or after `ms`.
 */
export function running(reconciler: Reconciler, id: string, generation: bigint, ms = 90_000): Promise<InstanceObservation> {
  return waitFor(
    () => {
      const o = reconciler.observations().find((x) => x.databaseId === id);
      if (o?.state === ObservedState.FAILED) throw new Error(`${id} failed: ${o.message}`);
      return o?.state === ObservedState.RUNNING && o.observedGeneration >= generation && o;
    },
    ms,
    `${id} running`,
  );
}

/**
 * Where a replica or standby of `primaryId` streams from: the primary's replication endpoint as its running
 * observation reported it, its CA, the replica's slot there and the seed backup it starts from (PostgreSQL 17).
 */
export function replicaSourceOf(
  primaryId: string,
  endpoint: Pick<InstanceObservation, "replicationAddress" | "replicationPort">,
  o: { ca: string; slotName: string; seedBackupId: string },
): ReplicaSource {
  return create(ReplicaSourceSchema, {
    primaryDatabaseId: primaryId,
    primaryHost: `${primaryId}.example.test`,
    primaryCaPem: o.ca,
    slotName: o.slotName,
    primaryVersion: "17",
    primaryAddress: endpoint.replicationAddress,
    primaryPort: endpoint.replicationPort,
    seedBackupId: o.seedBackupId,
  });
}
