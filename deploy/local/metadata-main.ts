/**
 * The keeper of the local stack's metadata PostgreSQL: one of the runner's
 * children like any service. It runs the server in the foreground and starts
 * it again the moment it dies (kill -9 included), so the services' pools find
 * it back within seconds; on SIGTERM — or when the runner dies (child-guard.ts)
 * — it shuts the server down (fast) and exits.
 *
 * Env: DBAAS_DATA_DIR, METADATA_PG_PORT (see localStackLayout), METADATA_PG_USER
 * (the server's OS user, default `dbaas-metadata`, created when missing).
 */
import type { ChildProcess } from "node:child_process";
import { localStackLayout } from "@dbaas/kit";
import {
  applyMetadataPassword,
  awaitMetadataReady,
  clearPreviousServer,
  prepareMetadataCluster,
  spawnMetadataServer,
} from "./metadata-postgres.ts";

const say = (msg: string) => process.stdout.write(`${JSON.stringify({ level: "info", msg })}\n`);
const layout = localStackLayout();
const cluster = await prepareMetadataCluster(layout.dataDir, layout.metadata);
say(`metadata PostgreSQL runs as ${cluster.runAs.user} (uid ${cluster.runAs.uid}), SCRAM only`);

let server: ChildProcess | undefined;
let stopping = false;
let restarts = 0;

async function start(): Promise<void> {
  const begun = Date.now();
  await clearPreviousServer(cluster, say);
  const cleared = Date.now();
  if (!cluster.passwordApplied) {
    // A cluster from before passwords: its role gets one before the server first listens without trust.
    await applyMetadataPassword(cluster, layout.dataDir);
    cluster.passwordApplied = true;
    say("metadata PostgreSQL: the postgres role's password set (its cluster was made with trust)");
  }
  const child = spawnMetadataServer(cluster);
  server = child;
  let exited = false;
  let ready = false;
  child.once("exit", (code, signal) => {
    exited = true;
    if (stopping) return;
    // A server that had come up starts again at once; one failing at start-up backs off.
    restarts = ready ? 1 : restarts + 1;
    const delay = restarts === 1 ? 0 : Math.min(100 * 2 ** (restarts - 2), 5_000);
    say(`metadata PostgreSQL exited (${signal ?? code}); starting it again in ${delay} ms`);
    setTimeout(() => void start().catch(fail), delay);
  });
  try {
    await awaitMetadataReady(cluster.port, cluster.password, () => exited);
  } catch (err) {
    if (exited) return; // the exit handler starts it again
    throw err;
  }
  ready = true;
  // The phases of a restart, to tell a slow recovery's cause (the old server's backends, or the new one's start).
  say(
    `metadata PostgreSQL ready on port ${cluster.port} (pid ${child.pid}) after ${Date.now() - begun} ms (${cleared - begun} ms clearing the previous server)`,
  );
}

function fail(err: unknown): void {
  process.stderr.write(`metadata PostgreSQL: ${(err as Error).message}\n`);
  void stop(1);
}

async function stop(exitCode: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  const child = server;
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGINT"); // fast shutdown: roll back open transactions, checkpoint, exit
    const kill = setTimeout(() => child.kill("SIGQUIT"), 30_000);
    await exited;
    clearTimeout(kill);
  }
  process.exit(exitCode);
}

process.on("SIGTERM", () => void stop(0));
process.on("SIGINT", () => void stop(0));
await start().catch(fail);
