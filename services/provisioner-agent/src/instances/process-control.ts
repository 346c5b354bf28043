import { readFile, realpath, unlink } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { InstanceSettings } from "../runtime.ts";
import { admitClients } from "./admission.ts";
import type { ServerBinaries } from "./binaries.ts";
import { errMsg, pathExists, prepareLogFile, removeStaleTempFiles, tail } from "./files.ts";
import type { Host } from "./host.ts";
import { observeInstance, readPidFile } from "./observe.ts";
import { tcpPortRefuses } from "./probe.ts";
import { pidExists } from "./procfs.ts";
import { runCommand } from "./run-as.ts";
import { configPath, renderConfig, writeStartConfig } from "./server-config.ts";
import { ensureServerCertificate } from "./tls.ts";
import { assertId, assertSettings } from "./validate.ts";

/**
 * Process control: starting and stopping postmasters, and cleaning up after
 * one that died. `startInstance` and `stopInstance` change an instance, so
 * their callers run them in the instance's turn (serial.ts).
 */

export const START_TIMEOUT_S = 30;
export const STOP_TIMEOUT_S = 30;

export function pgCtl(host: Host, bins: ServerBinaries, args: string[], timeoutMs: number) {
  return runCommand(bins.pgCtl, args, { runAs: host.runAs, timeoutMs });
}

/**
 * Kills whatever server runs from a throwaway directory (a template build
 * server orphaned by an agent crash) so it can be deleted safely.
 */
export async function killServerProcessesIn(host: Host, dir: string): Promise<void> {
  let real: string;
  try {
    real = await realpath(dir);
  } catch {
    return;
  }
  for (let i = 0; i < 50; i++) {
    const pids = host.serverPidsIn(real);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await sleep(20);
  }
}

/**
 * After a postmaster dies, its backends linger until they notice; a new
 * postmaster refuses to start while they still hold the old shared memory.
 */
async function reapCrashed(host: Host, id: string, removePidFile: boolean): Promise<void> {
  const dir = host.instanceDir(id);
  const real = await realpath(dir);
  const deadline = Date.now() + 5000;
  let pids = host.serverPidsIn(real);
  while (pids.length > 0 && Date.now() < deadline) {
    await sleep(25);
    pids = host.serverPidsIn(real);
  }
  if (pids.length > 0) {
    host.log(`instance ${id}: killing ${pids.length} orphaned server processes`);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
    }
    const killDeadline = Date.now() + 5000;
    while (host.serverPidsIn(real).length > 0 && Date.now() < killDeadline) await sleep(25);
  }
  const pf = await readPidFile(dir);
  if (!pf) return;
  // PostgreSQL treats its lock files as stale only if kill(pid, 0) fails. A
  // killed postmaster stays a zombie until init reaps it (seconds, on some
  // hosts) and its pid may be recycled; either blocks the new postmaster.
  // No process of ours runs in the directory any more, so the locks are
  // stale: remove them when PostgreSQL would not see that by itself.
  const blocking = pidExists(pf.pid);
  if ((blocking || removePidFile) && pf.port && pf.socketDir) {
    const sockLock = path.join(pf.socketDir, `.s.PGSQL.${pf.port}.lock`);
    const lockOwner = Number((await readFile(sockLock, "utf8").catch(() => "")).split("\n")[0]);
    if (lockOwner === pf.pid) {
      await unlink(path.join(pf.socketDir, `.s.PGSQL.${pf.port}`)).catch(() => {});
      await unlink(sockLock).catch(() => {});
    }
  }
  if (removePidFile || blocking) await unlink(path.join(dir, "postmaster.pid")).catch(() => {});
}

/** Fast shutdown (immediate, then SIGKILL, if that fails); resolves when the postmaster is gone and the port refuses. */
export async function stopInstance(host: Host, id: string): Promise<void> {
  const dir = host.instanceDir(id);
  const obs = await observeInstance(host, id);
  if (obs.state === "absent" || obs.state === "stopped") return;
  if (obs.state === "crashed") {
    await reapCrashed(host, id, true);
    host.log(`instance ${id}: cleaned up after crashed postmaster ${obs.pid ?? "?"}`);
    return;
  }
  const bins = host.binariesFor(await host.majorOf(dir));
  const pid = obs.pid!;
  const real = await realpath(dir);
  try {
    await pgCtl(host, bins, ["-D", dir, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_S), "stop"], (STOP_TIMEOUT_S + 10) * 1000);
  } catch (e) {
    host.log(`instance ${id}: fast stop failed (${errMsg(e)}); using immediate shutdown`);
    await pgCtl(host, bins, ["-D", dir, "-m", "immediate", "-w", "-t", "10", "stop"], 20_000).catch(() => {});
    if (host.isPostmasterIn(pid, real)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
    }
  }
  const deadline = Date.now() + 10_000;
  while ((host.isPostmasterIn(pid, real) || host.serverPidsIn(real).length > 0) && Date.now() < deadline) await sleep(20);
  if (host.isPostmasterIn(pid, real)) throw new Error(`instance ${id}: postmaster ${pid} still running after stop`);
  if (obs.port) {
    while (!(await tcpPortRefuses(host.probeHost, obs.port, 500))) {
      if (Date.now() > deadline)
        throw new Error(`instance ${id}: stopped, but something still accepts connections on ${host.probeHost}:${obs.port}`);
      await sleep(50);
    }
  }
  host.log(`instance ${id}: stopped`);
}

/**
 * Starts the instance with `o`. Already running with exactly these settings:
 * only the password and access rules are applied again. Running with other
 * settings: stopped first. Crashed: its leftovers are reaped first.
 */
export async function startInstance(host: Host, id: string, o: InstanceSettings): Promise<void> {
  assertId(id);
  assertSettings(o);
  const dir = host.instanceDir(id);
  if (!(await pathExists(path.join(dir, "PG_VERSION")))) throw new Error(`instance ${id} is not provisioned`);
  const bins = host.binariesFor(await host.majorOf(dir));
  const ca = await host.ca();
  await host.ensureSocketDir();
  const conf = renderConfig(host, o);
  const certOpts = { owner: { uid: host.runAs.uid, gid: host.runAs.gid } };

  let obs = await observeInstance(host, id);
  if (obs.state === "running") {
    const current = await readFile(configPath(dir), "utf8").catch(() => "");
    if (current === conf && obs.port === o.port && !obs.message) {
      await ensureServerCertificate(ca, o.hostname, dir, certOpts);
      await admitClients(host, id, o, ca);
      host.log(`instance ${id}: already running; password and access rules re-applied`);
      return;
    }
    host.log(`instance ${id}: settings changed; restarting`);
    await stopInstance(host, id);
    obs = await observeInstance(host, id);
  }
  if (obs.state === "crashed") {
    host.log(`instance ${id}: ${obs.message ?? "crashed"}; recovering`);
    await reapCrashed(host, id, false);
  }

  await removeStaleTempFiles(dir);
  await ensureServerCertificate(ca, o.hostname, dir, certOpts);
  await writeStartConfig(host, dir, conf);
  const logFile = host.logPath(id);
  await prepareLogFile(host.runAs, logFile);
  const started = Date.now();
  try {
    await pgCtl(host, bins, ["-D", dir, "-l", logFile, "-w", "-t", String(START_TIMEOUT_S), "start"], (START_TIMEOUT_S + 10) * 1000);
  } catch (e) {
    throw new Error(`instance ${id}: server did not start: ${errMsg(e)}\n--- ${logFile} ---\n${await tail(logFile)}`);
  }
  await admitClients(host, id, o, ca);
  host.log(`instance ${id}: running on port ${o.port} (tier ${o.tier}) after ${Date.now() - started} ms`);
}
