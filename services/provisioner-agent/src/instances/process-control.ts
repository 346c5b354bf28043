import { realpath, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  fileSize,
  finishRestore,
  lastRestoredWal,
  readFrom,
  readRestoreMarker,
  type RestoreMarker,
  recoverySignalPath,
  TARGET_NOT_REACHED,
  writeRecoveryConfig,
  writeRestoreMarker,
} from "../backups/recovery-state.ts";
import type { InstanceSettings } from "../runtime.ts";
import { admitClients } from "./admission.ts";
import { withAgentClient } from "./agent-socket.ts";
import type { ServerBinaries } from "./binaries.ts";
import { errMsg, fsyncDir, pathExists, prepareLogFile, readOwned, removeStaleTempFiles, serverFilesOf, tail, writeOwned } from "./files.ts";
import type { Host } from "./host.ts";
import { observeInstance, readPidFile } from "./observe.ts";
import { writeAutoConf } from "./parameters.ts";
import { tcpPortRefuses } from "./probe.ts";
import {
  choosePrivatePort,
  guardPrivatePort,
  linkAgentSocket,
  publishedPortOf,
  streamSourceIn,
  unlinkAgentSocket,
} from "./private-address.ts";
import { pidExists, processUids } from "./procfs.ts";
import { type RunAsIdentity, runCommand } from "./run-as.ts";
import { removeReplicaFiles, standbySignalPath, writeReplicaFiles } from "./replication.ts";
import { configPath, isUnpublished, lastPrivatePort, renderConfig, writeStartConfig } from "./server-config.ts";
import { tierResourceLimits } from "./tier-settings.ts";
import { logEnd, messagesSince } from "../server-log/reader.ts";
import { ensureServerCertificate } from "./tls.ts";
import { assertId, assertSettings } from "./validate.ts";

/**
 * Process control: starting and stopping postmasters, and cleaning up after
 * one that died. `startInstance` and `stopInstance` change an instance, so
 * their callers run them in the instance's turn (serial.ts).
 */

export const START_TIMEOUT_S = 30;
export const STOP_TIMEOUT_S = 30;
/** A restored instance's replay up to promotion: generous, a week of busy WAL takes a while. */
const RECOVERY_TIMEOUT_MS = 4 * 3600 * 1000;
/** Until recovery begins: a restored directory is fsync'd whole first (it was not shut down cleanly). */
const RECOVERY_START_TIMEOUT_S = 600;
const RECOVERY_PROGRESS_MS = 10_000;

/**
 * pg_ctl as `user`: the server's own (a template's builder while it is built); `beforeExec` runs with its pid before it
 * execs (a start joins the server's cgroup).
 */
export function pgCtl(
  user: RunAsIdentity,
  bins: ServerBinaries,
  args: string[],
  timeoutMs: number,
  beforeExec?: (pid: number) => Promise<void>,
) {
  return runCommand(bins.pgCtl, args, { runAs: user, timeoutMs, ...(beforeExec ? { beforeExec } : {}) });
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

/** How long the processes a purge kills in a server's cgroup may take to be gone (a loaded host's exits included). */
const LEFTOVER_KILL_MS = 60_000;

/**
 * At a purge, once the server is stopped and before its uid is free for the next database (its data directory
 * gone): SIGKILLs every process still in the server's cgroup that runs as `uid` (real or effective) — what its user
 * left behind, say a process escaped from PostgreSQL by a double fork, which kept its uid and its cgroup — waits
 * until none is listed there any more (up to LEFTOVER_KILL_MS, else throws: the purge fails and is retried), then
 * removes the cgroup. Found by cgroup, not by uid alone: agents on one machine whose uid ranges overlap (separate
 * local stacks) have servers of the same uid, each in a cgroup of its own agent. A process of another uid in the
 * cgroup (put there by root) is never killed; it keeps the cgroup, which then stays (logged). Without cgroups
 * (mode "none") nothing can tell such a process apart, and nothing is killed: said in the log.
 */
export async function killCgroupLeftovers(host: Host, id: string, uid: number): Promise<void> {
  const { cgroups } = host;
  if (cgroups.mode === "none") {
    host.log(
      `instance ${id}: no cgroups (${cgroups.reason}): processes its server's user (uid ${uid}) may have left running are not looked for`,
    );
    return;
  }
  const ofUid = async () =>
    (await cgroups.procs(id)).filter((pid) => {
      if (pid === process.pid) return false;
      const u = processUids(pid);
      return u !== undefined && (u.real === uid || u.effective === uid);
    });
  const killed = new Set<number>();
  const deadline = Date.now() + LEFTOVER_KILL_MS;
  for (let pids = await ofUid(); pids.length > 0; pids = await ofUid()) {
    if (Date.now() > deadline)
      throw new Error(
        `instance ${id}: process(es) ${pids.join(", ")} of uid ${uid} still in its cgroup ${LEFTOVER_KILL_MS / 1000} s after SIGKILL`,
      );
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
        killed.add(pid);
      } catch (e) {
        // Exited since it was listed.
        if ((e as NodeJS.ErrnoException).code !== "ESRCH") throw e;
      }
    }
    await sleep(20);
  }
  if (killed.size > 0)
    host.log(`instance ${id}: killed ${killed.size} process(es) of its uid ${uid} left in its cgroup (${[...killed].join(", ")})`);
  const kept = await cgroups.remove(id);
  if (kept.length > 0) host.log(`instance ${id}: its cgroup stays: process(es) of other uids in it (${kept.join(", ")})`);
}

/**
 * The server's cgroup once its server is gone (a stop, a crash cleaned up): removed, or kept with what still lives in
 * it (said in the log). Such a process was left by the server's user; it runs on until the database is purged.
 */
async function releaseCgroup(host: Host, id: string): Promise<void> {
  const kept = await host.cgroups.remove(id);
  if (kept.length > 0)
    host.log(
      `instance ${id}: its cgroup stays: ${kept.length} process(es) still in it after the server (${kept.join(", ")}); a purge kills those of its uid`,
    );
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
  const pf = await readPidFile(dir, host.serverSocketDir(id));
  if (!pf) return;
  // PostgreSQL treats its lock files as stale only if kill(pid, 0) fails. A
  // killed postmaster stays a zombie until init reaps it (seconds, on some
  // hosts) and its pid may be recycled; either blocks the new postmaster.
  // No process of ours runs in the directory any more, so the locks are
  // stale: remove them when PostgreSQL would not see that by itself.
  const blocking = pidExists(pf.pid);
  // The socket directory named in postmaster.pid (which the server's user can rewrite) only if it is the one the
  // agent gave this server: another server's lock and socket must never be removed here.
  if ((blocking || removePidFile) && pf.port && pf.socketDir === host.serverSocketDir(id)) {
    const sockLock = path.join(pf.socketDir, `.s.PGSQL.${pf.port}.lock`);
    const lockOwner = Number((await readOwned(undefined, sockLock).catch(() => "")).split("\n")[0]);
    if (lockOwner === pf.pid) {
      await unlink(path.join(pf.socketDir, `.s.PGSQL.${pf.port}`)).catch(() => {});
      await unlink(sockLock).catch(() => {});
    }
  }
  if (removePidFile || blocking) await unlink(path.join(dir, "postmaster.pid")).catch(() => {});
}

/**
 * Fast shutdown (immediate, then SIGKILL, if that fails); resolves when the
 * postmaster is gone and both the published port (the proxy stops serving it
 * first) and the private one refuse. A clean (fast) shutdown keeps the
 * restore window complete by itself: with archiving on, PostgreSQL switches
 * to a new WAL file before its shutdown checkpoint and the archiver gets a
 * last round, so every commit before the stop reaches the spool.
 */
export async function stopInstance(host: Host, id: string): Promise<void> {
  await stopServer(host, id);
  // Stopped: its private port is no longer its (the next start may take another); the guard forgets its uid.
  await host.proxy.guardLocal(id, undefined);
}

async function stopServer(host: Host, id: string): Promise<void> {
  const dir = host.instanceDir(id);
  // The agent's kept sessions first: the stop would end them anyway, and none is handed out meanwhile.
  await host.adminSessions.close(id);
  await host.proxy.unserve(id);
  const obs = await observeInstance(host, id);
  if (obs.state === "absent" || obs.state === "stopped") return;
  const published = await publishedPortOf(configPath(dir), id);
  if (published) await unlinkAgentSocket(host, published);
  if (obs.state === "crashed") {
    await reapCrashed(host, id, true);
    await releaseCgroup(host, id);
    host.log(`instance ${id}: cleaned up after crashed postmaster ${obs.pid ?? "?"}`);
    return;
  }
  const bins = host.binariesFor(await host.majorOf(dir));
  const user = await host.serverUser(id);
  const pid = obs.pid!;
  const real = await realpath(dir);
  try {
    await pgCtl(user, bins, ["-D", dir, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_S), "stop"], (STOP_TIMEOUT_S + 10) * 1000);
  } catch (e) {
    host.log(`instance ${id}: fast stop failed (${errMsg(e)}); using immediate shutdown`);
    await pgCtl(user, bins, ["-D", dir, "-m", "immediate", "-w", "-t", "10", "stop"], 20_000).catch(() => {});
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
    while (!(await tcpPortRefuses(host.privateAddress, obs.port, 500))) {
      if (Date.now() > deadline)
        throw new Error(`instance ${id}: stopped, but something still accepts connections on ${host.privateAddress}:${obs.port}`);
      await sleep(50);
    }
  }
  // No process of the server left in it: the next start makes it again with its tier's limits (or finds it kept).
  await releaseCgroup(host, id);
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
  // Its own user, its own socket directory: no other server (and no other tenant) can enter either.
  let user = await host.serverUser(id);
  await host.ensureServerSocketDir(id, user);
  let certOpts = { owner: { uid: user.uid, gid: user.gid } };

  const restore = await readRestoreMarker(dir);
  let obs = await observeInstance(host, id);
  // A running server keeps its private port (a server from before the proxy listened on the published one: it moves).
  const last = await lastPrivatePort(dir);
  const privatePort =
    obs.state === "running" && obs.port && obs.port !== o.port
      ? obs.port
      : await choosePrivatePort(host, o.port, last ? { port: last } : undefined);
  const conf = renderConfig(host, id, o, privatePort);
  if (obs.state === "running") {
    const current = await readOwned(undefined, configPath(dir)).catch(() => "");
    if (!restore && current === conf && !obs.message) {
      await host.cgroups.apply(id, tierResourceLimits(o.tier));
      await ensureServerCertificate(ca, o.hostname, dir, certOpts);
      if (o.replica) await writeReplicaFiles(host, id, o.replica);
      await guardPrivatePort(host, id, privatePort, o.replica && { host: o.replica.primaryAddress, port: o.replica.primaryPort });
      await linkAgentSocket(host, id, o.port, privatePort);
      await admitClients(host, id, o, ca, privatePort);
      host.log(`instance ${id}: already running; password and access rules re-applied`);
      return;
    }
    // A restoring server left running by a crashed agent is restarted too: its
    // replay resumes, and this start sees the promotion through.
    host.log(`instance ${id}: ${restore ? "restore under way" : "settings changed"}; restarting`);
    await stopInstance(host, id);
    obs = await observeInstance(host, id);
  }
  if (obs.state === "crashed") {
    host.log(`instance ${id}: ${obs.message ?? "crashed"}; recovering`);
    await reapCrashed(host, id, false);
  }

  // Not running now: a server from before per-server users gets a uid of its own before it starts again.
  if (await host.ownServerUser(id)) {
    user = await host.serverUser(id);
    await host.ensureServerSocketDir(id, user);
    certOpts = { owner: { uid: user.uid, gid: user.gid } };
  }
  // After any stop (which removes the cgroup): the server starts inside its tier's limits.
  await host.cgroups.apply(id, tierResourceLimits(o.tier));
  await removeStaleTempFiles(dir);
  await ensureServerCertificate(ca, o.hostname, dir, certOpts);
  await host.ensureServerLogDir(id, user);
  // None at start: nothing streams from a server that is starting (a promoted standby's old peers may never), and
  // one waiting for a standby would take no write; the reconciler names those that stream once they do.
  await writeStartConfig(host, dir, conf, user, "");
  // The customer's overrides, read after dbaas.conf: a start runs with them (nothing left pending a restart).
  await writeAutoConf(user, dir, o.parameters ?? {});
  if (o.replica) {
    await writeReplicaFiles(host, id, o.replica);
    await writeOwned(user, standbySignalPath(dir), "");
  }
  // Before it listens: its private port refuses other tenants from its first moment, and a replica's walreceiver
  // gets through to its primary's at its first try.
  await guardPrivatePort(host, id, privatePort, o.replica && { host: o.replica.primaryAddress, port: o.replica.primaryPort });
  await linkAgentSocket(host, id, o.port, privatePort);
  const logFile = host.logPath(id);
  await prepareLogFile(user, logFile);
  const started = Date.now();
  if (restore) await startRestored(host, id, bins, o.port, restore);
  else await pgCtlStart(host, id, bins, START_TIMEOUT_S);
  await admitClients(host, id, o, ca, privatePort);
  host.log(`instance ${id}: running on port ${o.port} (private ${privatePort}, tier ${o.tier}) after ${Date.now() - started} ms`);
}

/**
 * After an agent restart, a server the previous agent left running (a
 * crash: a clean shutdown stops them) is served again on its published port,
 * as it was. A server still starting, or one a restore left unfinished, is
 * left to the reconciler's start.
 */
export async function resumeServing(host: Host, id: string): Promise<void> {
  // A restore the previous agent left half-way is not admitted yet: the reconciler's start finishes it and serves it.
  if (await readRestoreMarker(host.instanceDir(id))) return;
  const obs = await observeInstance(host, id);
  if (obs.state !== "running" || !obs.port || obs.message) return;
  const published = await publishedPortOf(configPath(host.instanceDir(id)), id);
  if (!published || published === obs.port) return;
  await host.ensureSocketDir();
  // Guarded again (this agent process knew nothing of it), a standby's port too, with the port it streams from.
  const conf = await readOwned(undefined, configPath(host.instanceDir(id))).catch(() => "");
  await guardPrivatePort(host, id, obs.port, streamSourceIn(conf));
  await linkAgentSocket(host, id, published, obs.port);
  // A standby is never served; a primary fenced before this (the agent's leases, restored at start) stays closed by its pg_hba.
  if (await isUnpublished(host.instanceDir(id))) return;
  await host.proxy.serve(id, { port: published, target: { host: host.privateAddress, port: obs.port } });
  host.log(`instance ${id}: found running; serving port ${published} again`);
}

async function pgCtlStart(host: Host, id: string, bins: ServerBinaries, timeoutS: number): Promise<void> {
  const logFile = host.logPath(id);
  try {
    // pg_ctl joins the server's cgroup before it runs: the postmaster and all it forks are inside.
    await pgCtl(
      await host.serverUser(id),
      bins,
      ["-D", host.instanceDir(id), "-l", logFile, "-w", "-t", String(timeoutS), "start"],
      (timeoutS + 10) * 1000,
      (pid) => host.cgroups.attach(id, pid),
    );
  } catch (e) {
    throw new Error(`instance ${id}: server did not start: ${errMsg(e)}\n--- ${logFile} ---\n${await tail(logFile)}`);
  }
}

/**
 * Start of a restored instance (the marker of recovery-state.ts): replays
 * the fetched WAL up to the target and promotes, then cleans up so the
 * instance is an ordinary one. pg_hba is locked and hot_standby is off
 * throughout, so nobody logs in before the caller has set the new verifier.
 */
async function startRestored(host: Host, id: string, bins: ServerBinaries, port: number, marker: RestoreMarker): Promise<void> {
  const dir = host.instanceDir(id);
  // Without recovery.signal PostgreSQL has promoted already (the agent crashed after that): only the cleanup is left.
  if (await pathExists(recoverySignalPath(dir))) await replay(host, id, bins, marker);
  else await pgCtlStart(host, id, bins, START_TIMEOUT_S);
  // The verifier is set next, which a server still in recovery (read-only) would refuse after the marker is gone.
  const recovering = await withAgentClient(
    host.socketDir,
    port,
    async (c) => (await c.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r")).rows[0]!.r,
  );
  if (recovering) throw new Error(`instance ${id}: still in recovery after its start; not letting clients in`);
  await finishRestore(serverFilesOf(await host.serverUser(id)), dir);
  host.log(`instance ${id}: restored from ${marker.sourceDatabaseId}'s backup ${marker.backupId} to ${marker.restoreTime}; promoted`);
}

/** Runs the archive recovery to promotion (resuming one a stop or crash interrupted), with progress in the agent's log. */
async function replay(host: Host, id: string, bins: ServerBinaries, marker: RestoreMarker): Promise<void> {
  const dir = host.instanceDir(id);
  for (;;) {
    await writeRecoveryConfig(serverFilesOf(await host.serverUser(id)), dir, marker);
    const to = marker.replayToEnd ? "their end" : marker.restoreTime;
    host.log(
      `instance ${id}: replaying ${marker.walFiles} WAL files of ${marker.sourceDatabaseId}'s backup ${marker.backupId} up to ${to}`,
    );
    if ((await recoverToPromotion(host, id, bins)) || marker.replayToEnd) return;
    // The archived WAL ends before any commit after the target (an idle
    // source, a target at the end of the window). The databases service only
    // asks for targets up to the window's end, i.e. all WAL up to the target
    // is in the store, so every commit in it is at or before the target and
    // replaying all of it is exactly the state at the target.
    host.log(`instance ${id}: no commit after ${marker.restoreTime} in the archived WAL; replaying all of it`);
    marker = { ...marker, replayToEnd: true };
    await writeRestoreMarker(dir, marker);
    if ((await observeInstance(host, id)).state === "crashed") await reapCrashed(host, id, true);
  }
}

/**
 * Starts the server in archive recovery and waits until it has promoted
 * (true) or stopped because the WAL ended before the target (false); any
 * other end is thrown with the server log's tail. pg_ctl counts a server as
 * started once recovery begins; promotion is the pid file's "ready".
 */
async function recoverToPromotion(host: Host, id: string, bins: ServerBinaries): Promise<boolean> {
  const dir = host.instanceDir(id);
  const logFile = host.logPath(id);
  const offset = await fileSize(logFile);
  // Once its logging collector runs, the server writes to its jsonlog files, before that to pg_ctl's log file.
  const mark = await logEnd(host.serverLogDir(id));
  const output = async () => `${await readFrom(logFile, offset)}\n${await messagesSince(host.serverLogDir(id), mark)}`;
  const ended = async (e: unknown) => {
    if ((await output()).includes(TARGET_NOT_REACHED)) return false;
    throw e;
  };
  try {
    await pgCtlStart(host, id, bins, RECOVERY_START_TIMEOUT_S);
  } catch (e) {
    return ended(e);
  }
  const real = await realpath(dir);
  const started = Date.now();
  let reported = started;
  for (;;) {
    const pf = await readPidFile(dir, host.serverSocketDir(id));
    if (pf?.status === "ready") return true;
    if (!pf || !host.isPostmasterIn(pf.pid, real)) {
      return ended(new Error(`instance ${id}: server stopped during recovery\n--- ${logFile} ---\n${await tail(logFile)}`));
    }
    if (Date.now() - started > RECOVERY_TIMEOUT_MS) {
      // Left running: the next start stops it and resumes from its last restartpoint.
      throw new Error(
        `instance ${id}: recovery not finished after ${RECOVERY_TIMEOUT_MS / 1000} s\n--- ${logFile} ---\n${await tail(logFile)}`,
      );
    }
    if (Date.now() - reported >= RECOVERY_PROGRESS_MS) {
      reported = Date.now();
      const wal = lastRestoredWal(await output()) ?? "(none yet)";
      host.log(`instance ${id}: recovering for ${Math.round((reported - started) / 1000)} s; replayed up to WAL ${wal}`);
    }
    await sleep(100);
  }
}

/**
 * A promoted replica's data becomes instance `id`'s: `replicaId` is promoted
 * if it still runs as a standby, stopped, and its directory renamed to `id`
 * (the ordinary start that follows gives it `id`'s certificate, port and
 * password). Every step is idempotent, so an agent killed anywhere converges
 * on its next pass: once `id` exists and `replicaId` does not, it is done.
 */
export async function adoptReplica(host: Host, id: string, replicaId: string): Promise<void> {
  assertId(replicaId);
  const dir = host.instanceDir(id);
  const from = host.instanceDir(replicaId);
  const haveFrom = await pathExists(path.join(from, "PG_VERSION"));
  // What follows the rename (the log, the meter's counters) is done again: the agent may have died right after it.
  const finish = async () => {
    if (!(await pathExists(host.logPath(id)))) await rename(host.logPath(replicaId), host.logPath(id)).catch(() => {});
    // The server log goes with the data (its files are the promoted server's user's).
    if (!(await pathExists(host.serverLogDir(id)))) await rename(host.serverLogDir(replicaId), host.serverLogDir(id)).catch(() => {});
    await host.proxy.forget(replicaId);
  };
  if (await pathExists(dir)) {
    if (haveFrom) throw new Error(`instance ${id}: cannot adopt ${replicaId}: both data directories exist`);
    await finish();
    return;
  }
  if (!haveFrom) throw new Error(`instance ${id}: cannot adopt ${replicaId}: its data directory is not on this host`);
  const obs = await observeInstance(host, replicaId);
  const pf = await readPidFile(from, host.serverSocketDir(replicaId));
  if (obs.state === "running" && !obs.message && pf?.port && pf.socketDir) {
    await withAgentClient(
      pf.socketDir,
      pf.port,
      async (c) => {
        if (!(await c.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r")).rows[0]!.r) return;
        const { rows } = await c.query<{ ok: boolean }>("SELECT pg_promote(true, 60) AS ok");
        if (!rows[0]!.ok)
          throw new Error(`instance ${replicaId}: not promoted within 60 s\n--- server log ---\n${await tail(host.logPath(replicaId))}`);
        host.log(`instance ${replicaId}: promoted`);
      },
      70_000,
    );
  }
  await stopInstance(host, replicaId);
  // A standby adopted while it was not running (stopped, or its postmaster
  // died) opens as a primary on its next start, after crash recovery to the
  // end of the WAL it had received.
  await unlink(standbySignalPath(from)).catch(() => {});
  await removeReplicaFiles(host, replicaId);
  await rename(from, dir);
  await fsyncDir(host.instancesDir);
  await finish();
  host.log(`instance ${id}: adopted the data of ${replicaId}`);
}
