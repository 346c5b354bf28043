import { existsSync } from "node:fs";
import { mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { BlobStore } from "../backups/blob-store.ts";
import { stageRestore, stageSeed } from "../backups/restore.ts";
import type { RestoreRequest, SeedRequest } from "../runtime.ts";
import { AGENT_SUPERUSER, ADMIN_ROLE, DEFAULT_DATABASE, withAgentClient } from "./agent-socket.ts";
import { rand } from "../temp-name.ts";
import {
  chownNoFollow,
  errMsg,
  fsyncDir,
  pathExists,
  prepareLogFile,
  readOwned,
  removeTree,
  serverFilesOf,
  tail,
  writeOwned,
} from "./files.ts";
import type { Host } from "./host.ts";
import { killCgroupLeftovers, killServerProcessesIn, pgCtl, START_TIMEOUT_S, STOP_TIMEOUT_S, stopInstance } from "./process-control.ts";
import { runCommand } from "./run-as.ts";
import { INCLUDE_LINE, lockedHba, renderIdent } from "./server-config.ts";
import { ID_RE } from "./validate.ts";

/**
 * Data directories: per-version templates, instances copied from them, purges
 * and the leftovers of all three. Every one is built under a temp name and
 * renamed into place, so a crash never leaves a half-built directory under a
 * real name; temp names (`.tmp-<hex>`, `.purging-<hex>`) are what
 * {@link DataDirs.cleanupLeftovers} removes.
 */
export interface DataDirs {
  /** Builds (once; concurrent callers share the build) and returns the template directory of `major`. */
  ensureTemplate(major: string): Promise<string>;
  /**
   * Copies the template into the instance's directory, or with `restore`
   * fills it from the source's backups, or with `seed` from a primary's base
   * backup (backups/restore.ts); no-op if it exists with the same major. In
   * the id's turn.
   */
  provision(id: string, major: string, from?: { restore?: RestoreRequest; seed?: SeedRequest }): Promise<void>;
  /** Stops the instance and deletes its data directory and log. In the id's turn. */
  purge(id: string): Promise<void>;
  /** Ids that have a complete data directory. */
  list(): Promise<string[]>;
  /** Removes `.tmp-`/`.purging-` leftovers of crashed operations; returns removed names. */
  cleanupLeftovers(): Promise<string[]>;
}

/**
 * `isQueued(id)`: an operation on `id` is under way, so its leftovers are its own to clean.
 * `store`: where restores fetch backups from (none: restores fail).
 */
export function createDataDirs(host: Host, isQueued: (id: string) => boolean, store?: BlobStore): DataDirs {
  const { templatesDir, instancesDir, runAs, log } = host;
  /** Temp/purging paths owned by an operation in flight; cleanup must not touch them. */
  const inFlight = new Set<string>();
  const templateBuilds = new Map<string, Promise<string>>();

  async function removeLeftover(p: string): Promise<void> {
    await killServerProcessesIn(host, p);
    // An interrupted purge: what its server's user left in the cgroup goes before the uid (the directory's owner) is free.
    const name = path.basename(p);
    const id = name.slice(0, name.indexOf(".purging-"));
    if (path.dirname(p) === instancesDir && name.includes(".purging-") && ID_RE.test(id) && !(await pathExists(host.instanceDir(id)))) {
      const st = await stat(p).catch(() => undefined);
      if (st) await killCgroupLeftovers(host, id, st.uid);
    }
    await removeTree(p);
  }

  async function buildTemplate(major: string): Promise<string> {
    const bins = host.binariesFor(major);
    const final = path.join(templatesDir, major);
    if (await pathExists(path.join(final, "PG_VERSION"))) return final;
    await host.init();
    await host.ensureSocketDir();
    const started = Date.now();
    for (const name of await readdir(templatesDir)) {
      if (name.startsWith(`${major}.tmp-`)) {
        log(`template ${major}: removing leftover ${name}`);
        await removeLeftover(path.join(templatesDir, name));
      }
    }
    // Socket-only and on a port below 1024: instance ports are >= 1024, so
    // this socket name can never collide with a running instance's.
    const buildPort = 1000 + (Number(major) % 24);
    // Only builds of this major use that socket name and we hold the build,
    // so a lock file left by a killed build server is stale (and its pid may
    // linger as a zombie, which PostgreSQL would mistake for a live server).
    const buildSocketDir = path.join(host.socketDir, `.build-${major}`);
    await host.ensureServerSocketDir(`.build-${major}`, runAs);
    await rm(path.join(buildSocketDir, `.s.PGSQL.${buildPort}.lock`), { force: true });
    await rm(path.join(buildSocketDir, `.s.PGSQL.${buildPort}`), { force: true });
    const tmp = `${final}.tmp-${rand()}`;
    const buildLog = path.join(templatesDir, `${major}.build.log`);
    inFlight.add(tmp);
    try {
      await mkdir(tmp, { mode: 0o700 });
      if (runAs.switchUser) await chownNoFollow(tmp, runAs);
      await writeFile(buildLog, "");
      await prepareLogFile(runAs, buildLog);
      await runCommand(
        bins.initdb,
        [
          "-D",
          tmp,
          "-U",
          AGENT_SUPERUSER,
          "--auth-local=peer",
          "--auth-host=reject",
          "--no-sync",
          "-E",
          "UTF8",
          "--locale=C",
          "--no-instructions",
        ],
        { runAs, timeoutMs: 120_000 },
      );
      const pgConf = path.join(tmp, "postgresql.conf");
      await writeOwned(
        runAs,
        pgConf,
        `${await readOwned(runAs, pgConf)}\n# dbaas: SCRAM only. Port, TLS and tier settings are written by the agent on every start.\npassword_encryption = 'scram-sha-256'\n${INCLUDE_LINE}\n`,
      );
      // The agent's peer login, as in every instance (server-config.ts), before the build server starts.
      await writeOwned(runAs, path.join(tmp, "pg_ident.conf"), renderIdent());
      await writeOwned(runAs, path.join(tmp, "pg_hba.conf"), lockedHba());
      const o = `-c listen_addresses= -c unix_socket_directories=${buildSocketDir} -c port=${buildPort} -c fsync=off`;
      try {
        await pgCtl(
          runAs,
          bins,
          ["-D", tmp, "-l", buildLog, "-w", "-t", String(START_TIMEOUT_S), "-o", o, "start"],
          (START_TIMEOUT_S + 10) * 1000,
        );
      } catch (e) {
        throw new Error(`template ${major}: server did not start: ${errMsg(e)}\n${await tail(buildLog)}`);
      }
      try {
        await withAgentClient(buildSocketDir, buildPort, async (c) => {
          await c.query(`CREATE ROLE ${ADMIN_ROLE} LOGIN CREATEDB CREATEROLE`);
          await c.query(`CREATE DATABASE ${DEFAULT_DATABASE} OWNER ${ADMIN_ROLE}`);
        });
      } finally {
        await pgCtl(runAs, bins, ["-D", tmp, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_S), "stop"], (STOP_TIMEOUT_S + 10) * 1000);
      }
      await rm(path.join(tmp, "postmaster.opts"), { force: true });
      // initdb ran with --no-sync and the build server with fsync=off: flush
      // once here, since every instance will be copied from this directory.
      await runCommand("sync", ["-f", tmp], { timeoutMs: 120_000 });
      await rename(tmp, final);
      await fsyncDir(templatesDir);
      log(`template ${major}: built in ${Date.now() - started} ms`);
      return final;
    } catch (e) {
      await removeLeftover(tmp).catch(() => {});
      throw e;
    } finally {
      inFlight.delete(tmp);
    }
  }

  function ensureTemplate(major: string): Promise<string> {
    let p = templateBuilds.get(major);
    if (!p) {
      p = buildTemplate(major).finally(() => templateBuilds.delete(major));
      templateBuilds.set(major, p);
    }
    return p;
  }

  async function removeOwnLeftovers(id: string): Promise<void> {
    for (const name of await readdir(instancesDir)) {
      if (name.startsWith(`${id}.tmp-`) || name.startsWith(`${id}.purging-`)) {
        const p = path.join(instancesDir, name);
        if (!inFlight.has(p)) await removeLeftover(p);
      }
    }
  }

  async function provision(id: string, major: string, from: { restore?: RestoreRequest; seed?: SeedRequest } = {}): Promise<void> {
    const { restore, seed } = from;
    const final = host.instanceDir(id);
    if (await pathExists(final)) {
      const have = await host.majorOf(final).catch(() => "?");
      if (have !== major) throw new Error(`instance ${id} already exists with PostgreSQL ${have}, not ${major}`);
      return;
    }
    host.binariesFor(major);
    const source = restore?.sourceDatabaseId ?? seed?.primaryDatabaseId;
    if (source && !store) throw new Error(`instance ${id}: cannot create from ${source}'s backups: no backup store configured`);
    const template = source ? undefined : await ensureTemplate(major);
    await removeOwnLeftovers(id);
    const tmp = `${final}.tmp-${rand()}`;
    inFlight.add(tmp);
    try {
      // The directory is made for the new server's own user; everything in it becomes that user's.
      const user = await host.makeServerDir(tmp);
      if (template) {
        // cp -a keeps the 0700/0600 modes PostgreSQL demands; the copy is then given to the server's user.
        await runCommand("cp", ["-a", "--", `${template}/.`, tmp], { timeoutMs: 120_000 });
        if (user.switchUser) await runCommand("chown", ["-R", `${user.uid}:${user.gid}`, "--", tmp], { timeoutMs: 120_000 });
      } else {
        const o = {
          store: store!,
          server: serverFilesOf(user),
          dir: tmp,
          version: major,
          log: (m: string) => log(`instance ${id}: ${m}`),
        };
        if (seed) await stageSeed({ ...o, seed });
        else await stageRestore({ ...o, request: restore! });
        // Fetched data is worth a flush: unlike a template copy it cannot be remade from this host alone.
        await runCommand("sync", ["-f", tmp], { timeoutMs: 600_000 });
      }
      // The rename makes an agent crash harmless. A template copy and the
      // rename are not synced: surviving a host power loss would cost a
      // filesystem flush per create (~100 ms on ext4), and the template is synced once.
      await rename(tmp, final);
    } catch (e) {
      await removeTree(tmp).catch(() => {});
      throw e;
    } finally {
      inFlight.delete(tmp);
    }
    const pending = restore ? `, restore from ${restore.sourceDatabaseId} pending` : seed ? `, replica of ${seed.primaryDatabaseId}` : "";
    log(`instance ${id}: provisioned (PostgreSQL ${major}${pending}; its server runs as ${(await host.serverUser(id)).user})`);
  }

  async function purge(id: string): Promise<void> {
    const dir = host.instanceDir(id);
    if (await pathExists(dir)) {
      await stopInstance(host, id);
      const { uid } = await host.serverUser(id);
      const doomed = `${dir}.purging-${rand()}`;
      inFlight.add(doomed);
      try {
        await rename(dir, doomed);
        await fsyncDir(instancesDir);
        // The uid stays taken while the directory (under its .purging- name) exists: what the server's user left
        // running in its cgroup goes first (a crash here leaves the .purging- directory, whose cleanup does the same).
        await killCgroupLeftovers(host, id, uid);
        await removeTree(doomed);
      } finally {
        inFlight.delete(doomed);
      }
      log(`instance ${id}: purged`);
    }
    await removeOwnLeftovers(id);
    await rm(host.logPath(id), { force: true });
    await removeTree(host.serverLogDir(id));
  }

  async function list(): Promise<string[]> {
    await host.init();
    const entries = await readdir(instancesDir, { withFileTypes: true });
    return entries
      .filter((e) => e.isDirectory() && ID_RE.test(e.name))
      .map((e) => e.name)
      .sort();
  }

  async function cleanupLeftovers(): Promise<string[]> {
    await host.init();
    const removed: string[] = [];
    for (const dir of [instancesDir, templatesDir]) {
      for (const name of await readdir(dir)) {
        const p = path.join(dir, name);
        if (!/\.(tmp|purging)-[0-9a-f]+$/.test(name) || inFlight.has(p)) continue;
        // A leftover of an id with an operation in flight belongs to that operation's cleanup.
        if (dir === instancesDir && isQueued(name.slice(0, name.indexOf(".")))) continue;
        await removeLeftover(p);
        removed.push(name);
      }
    }
    // Logs of instances whose directory is gone (a purge interrupted at the end).
    for (const name of await readdir(instancesDir)) {
      const id = name.endsWith(".log") ? name.slice(0, -4) : undefined;
      if (!id || !ID_RE.test(id) || isQueued(id) || existsSync(host.instanceDir(id))) continue;
      await rm(path.join(instancesDir, name), { force: true });
      removed.push(name);
    }
    if (removed.length) log(`removed leftovers: ${removed.join(", ")}`);
    return removed;
  }

  return { ensureTemplate, provision, purge, list, cleanupLeftovers };
}
