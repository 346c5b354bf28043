import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { chown, mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { BackupState, type InstanceObservation, InstanceSpecSchema, ObservedState, RestoreSourceSchema } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type S3Server } from "@dbaas/test/support/s3-server";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { type BackupRecord, recordKey, walKey, walPrefix } from "../../src/backups/layout.ts";
import { isSealed } from "../../src/backups/encryption.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { openBlobStore } from "../../src/backups/open-store.ts";
import { planRestore, walFilesNeeded } from "../../src/backups/restore.ts";
import { lastSegmentNeeded, parseLsn, parseSegmentName } from "../../src/backups/wal.ts";
import { findServerBinaries } from "../../src/instances/binaries.ts";
import { resolveRunAs, runCommand } from "../../src/instances/run-as.ts";
import type { InstanceSettings, RestoreRequest } from "../../src/runtime.ts";
import { connect, freePort, query, randomPassword, reconcilerFor, scramVerifier } from "../support/fixture.ts";
import { type Fixture, managerFor, shutdown, startFixture, TEST_BACKUP_ENV, view, waitFor } from "./support.ts";
import { messagesSince } from "../../src/server-log/reader.ts";

// Point-in-time restore on real instances, from what the agent's own backup
// pipeline stored: a source archives its WAL (basic_archive → spool →
// uploader → file or S3 store, s3rver for the latter) and takes a base backup; new instances are created
// from them through the runtime, and the test checks row by row what they hold.

const HOST = "db-restored.example.test";

async function readJson<T>(fx: Fixture, key: string): Promise<T> {
  const chunks: Buffer[] = [];
  for await (const c of await fx.store.get(key)) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as T;
}

const cases = [
  { major: "17", storeKind: "file" },
  { major: "16", storeKind: "file" },
  { major: "17", storeKind: "s3" },
  { major: "16", storeKind: "s3" },
] as const;

describe.each(cases)("point-in-time restore (PostgreSQL $major, $storeKind store)", { timeout: 180_000 }, ({ major, storeKind }) => {
  /** The crash cases run once; every case restores row by row. */
  const all = major === "17" && storeKind === "file";
  let s3: S3Server | undefined;
  let fx: Fixture;
  let manager: BackupManager;
  let backup: BackupRecord;
  const password = randomPassword();
  const sourcePassword = randomPassword();
  /** Between the two batches. */
  let between: Date;
  /** The window's end as the agent reports it, once it covers the second batch. */
  let latest: Date;
  const batch1 = Array.from({ length: 20 }, (_, i) => i + 1);
  const batch2 = Array.from({ length: 20 }, (_, i) => i + 101);
  const runAs = resolveRunAs();

  const settings = async (): Promise<InstanceSettings> => ({
    port: await freePort(),
    tier: "micro",
    hostname: HOST,
    scramVerifier: scramVerifier(password),
  });
  const restoreTo = (restoreTime: Date): RestoreRequest => ({ sourceDatabaseId: fx.id, restoreTime });
  async function restore(id: string, restoreTime: Date): Promise<number> {
    const s = await settings();
    await fx.runtime.create(id, { version: major, restore: restoreTo(restoreTime) });
    await fx.runtime.start(id, s);
    return s.port;
  }
  const ids = async (port: number) => (await query(port, password, "SELECT id FROM items ORDER BY id")).map((r) => Number(r.id));
  const instanceDir = (id: string) => path.join(fx.dataDir, "instances", id);

  beforeAll(async () => {
    if (storeKind === "s3") s3 = await startS3Server();
    const tag = `rst${major}${storeKind}`;
    fx = await startFixture(tag, major, s3 ? { store: openBlobStore(`s3://dbaas-backups/${tag}`, { ...s3.env, ...TEST_BACKUP_ENV }) } : {});
    ({ manager } = managerFor(fx));
    await manager.start();
    // The source runs a bigger tier (max_connections 100) than its restores (micro, 50): no hot standby
    // during the replay means PostgreSQL does not insist on the source's limits.
    await fx.runtime.resize(fx.id, { port: fx.port, tier: "small", hostname: fx.spec.host, scramVerifier: scramVerifier(sourcePassword) });
    const source = (sql: string) => query(fx.port, sourcePassword, sql);
    await source("CREATE TABLE items (id int PRIMARY KEY, note text)");
    manager.setDesired([{ ...fx.spec, backupIds: ["bkp-1"] }]);
    const done = await waitFor(
      () => view(manager, fx.id)?.backups.find((b) => b.backupId === "bkp-1" && b.state !== BackupState.RUNNING),
      90_000,
      "base backup",
    );
    expect(done.state).toBe(BackupState.COMPLETED);
    backup = await readJson<BackupRecord>(fx, recordKey(fx.id, "bkp-1"));
    await source(`INSERT INTO items SELECT g, 'first' FROM unnest(ARRAY[${batch1}]) g`);
    await sleep(300);
    between = new Date();
    await sleep(300);
    await source(`INSERT INTO items SELECT g, 'second' FROM unnest(ARRAY[${batch2}]) g`);
    const committed = Date.now();
    await fx.sql("SELECT pg_switch_wal()");
    const end = await waitFor(
      () => {
        const t = view(manager, fx.id)?.latestRestoreTime;
        return t && timestampDate(t).getTime() > committed ? timestampDate(t) : undefined;
      },
      60_000,
      "restore window past the second batch",
    );
    latest = end;
  }, 180_000);

  afterAll(async () => {
    await shutdown(manager, fx);
    await s3?.close();
  }, 60_000);

  it("restores exactly the transactions committed up to the target, promoted, as an ordinary instance", async () => {
    const port = await restore("r-between", between);
    expect(await ids(port)).toEqual(batch1);
    const dir = instanceDir("r-between");
    // A user of its own (tenant isolation), not its source's.
    if (process.getuid?.() === 0) expect((await stat(dir)).uid).not.toBe((await stat(instanceDir(fx.id))).uid);
    expect(existsSync(path.join(dir, "dbaas-restore"))).toBe(false);
    expect(existsSync(path.join(dir, "dbaas-recovery.conf"))).toBe(false);
    expect(existsSync(path.join(dir, "recovery.signal"))).toBe(false);
    expect(await readFile(path.join(dir, "postgresql.conf"), "utf8")).not.toContain("dbaas-recovery.conf");
    // Writable: promoted, on a timeline of its own.
    await query(port, password, "INSERT INTO items VALUES (999, 'after the restore')");
    expect(await fx.runtime.observe("r-between")).toEqual({
      state: "running",
      port,
      pid: expect.any(Number),
      replicationAddress: "127.0.0.1",
      replicationPort: expect.any(Number),
      // A primary's current write position (high availability picks the standby with the most WAL).
      walPosition: expect.any(BigInt),
    });
    expect(await query(port, password, "SHOW max_connections")).toEqual([{ max_connections: "50" }]);
  });

  it("the restored instance takes its own password and refuses the source's, and serves its own certificate", async () => {
    const port = (await fx.runtime.observe("r-between")).port!;
    await expect(query(port, sourcePassword, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    expect(await query(port, password, "SELECT current_user AS u")).toEqual([{ u: "dbadmin" }]);
    // The base backup carried the source's certificate; the restored instance has one for its own host name.
    const ca = await fx.runtime.caCertificatePem();
    const c = await connect(port, password, { ssl: { ca, servername: HOST } });
    await c.end();
    await expect(connect(port, password, { ssl: { ca, servername: fx.spec.host } })).rejects.toThrow(/altnames|does not match/);
  });

  it("to the window's end (no commit after it in the WAL): every batch", async () => {
    const port = await restore("r-latest", latest);
    expect(await ids(port)).toEqual([...batch1, ...batch2]);
    // PostgreSQL stopped at the end of the WAL short of its target; the agent replayed all of it instead.
    // pg_ctl's log file until the logging collector runs, then the server's jsonlog (server-log/reader.ts).
    const serverLog =
      (await readFile(path.join(fx.dataDir, "instances", "r-latest.log"), "utf8")) +
      (await messagesSince(path.join(fx.dataDir, "server-logs", "r-latest"), undefined));
    expect(serverLog).toContain("recovery ended before configured recovery target was reached");
  });

  it("a target before the oldest backup, or of another major, is a clear error and leaves no instance", async () => {
    const early = new Date(Date.parse(backup.startedAt) - 3600_000);
    await expect(fx.runtime.create("r-early", { version: major, restore: restoreTo(early) })).rejects.toThrow(
      `no base backup of ${fx.id} before ${early.toISOString()}`,
    );
    const other = major === "17" ? "16" : "17";
    await expect(fx.runtime.create("r-other", { version: other, restore: restoreTo(latest) })).rejects.toThrow(/version mismatch/);
    const listed = await fx.runtime.list();
    expect(listed).not.toContain("r-early");
    expect(listed).not.toContain("r-other");
    expect((await readdir(path.join(fx.dataDir, "instances"))).filter((n) => n.includes(".tmp-"))).toEqual([]);
  });

  it.runIf(storeKind === "file")(
    "a backup begun after the target bounds the WAL fetched; a later target starts from that backup",
    async () => {
      manager.setDesired([{ ...fx.spec, backupIds: ["bkp-1", "bkp-2"] }]);
      const done = await waitFor(
        () => view(manager, fx.id)?.backups.find((b) => b.backupId === "bkp-2" && b.state !== BackupState.RUNNING),
        90_000,
        "second base backup",
      );
      expect(done.state).toBe(BackupState.COMPLETED);
      const second = await readJson<BackupRecord>(fx, recordKey(fx.id, "bkp-2"));
      // WAL beyond the second backup's end, which a restore to `between` must not fetch.
      await query(fx.port, sourcePassword, "INSERT INTO items VALUES (300, 'after the second backup')");
      const beyond = String((await fx.sql("SELECT pg_walfile_name(pg_switch_wal()) AS s"))[0]!.s);
      await waitFor(() => fx.store.exists(walKey(fx.id, beyond)), 20_000, `${beyond} in the store`);

      const plan = await planRestore(fx.store, fx.id, between, major);
      expect(plan.base.backupId).toBe("bkp-1");
      expect(plan.lastSegment).toBe(lastSegmentNeeded(parseLsn(second.stopLsn)));
      const names = walFilesNeeded(
        (await fx.store.list(walPrefix(fx.id))).map((b) => b.key),
        fx.id,
        plan,
      );
      expect(names).not.toContain(beyond);
      expect(names.every((n) => n.endsWith(".history") || parseSegmentName(n)!.segno <= plan.lastSegment!)).toBe(true);
      const port = await restore("r-bounded", between);
      expect(await ids(port)).toEqual(batch1);

      const later = await planRestore(fx.store, fx.id, new Date(Date.parse(second.stoppedAt) + 1), major);
      expect(later).toEqual({ base: second });
    },
  );

  it.runIf(all)("the reconciler creates a spec's restore_source from the source's backups and reports it running", async () => {
    const reports: InstanceObservation[] = [];
    const reconciler = reconcilerFor(fx, { concurrency: 1, report: (o) => reports.push(o) });
    const s = await settings();
    const spec = create(InstanceSpecSchema, {
      ...fx.spec,
      databaseId: "r-spec",
      port: s.port,
      host: HOST,
      scramVerifier: s.scramVerifier,
      restoreSource: create(RestoreSourceSchema, { databaseId: fx.id, restoreTime: timestampFromDate(between) }),
    });
    reconciler.setDesired([spec]);
    await waitFor(() => reports.find((o) => o.databaseId === "r-spec" && o.state !== ObservedState.UNSPECIFIED), 60_000, "a report");
    await reconciler.drain();
    expect(reports.map((o) => [o.state, o.message])).toEqual([[ObservedState.RUNNING, ""]]);
    expect(await ids(s.port)).toEqual(batch1);
  });

  it.runIf(all)("a restore that cannot be made is reported failed with why, and leaves no instance", async () => {
    const reports: InstanceObservation[] = [];
    const reconciler = reconcilerFor(fx, { concurrency: 1, report: (o) => reports.push(o) });
    const s = await settings();
    // Before the source's oldest backup: there is nothing to start from (the databases service never asks for this;
    // a store that lost the backups, or cannot be read, ends the same way).
    const early = new Date(Date.parse(backup.startedAt) - 3600_000);
    const spec = create(InstanceSpecSchema, {
      ...fx.spec,
      databaseId: "r-doomed",
      port: s.port,
      host: HOST,
      scramVerifier: s.scramVerifier,
      restoreSource: create(RestoreSourceSchema, { databaseId: fx.id, restoreTime: timestampFromDate(early) }),
    });
    // Each snapshot (or resync) is another attempt; the third failure is reported.
    for (let i = 1; i <= 3; i++) {
      reconciler.setDesired([spec]);
      await waitFor(() => reconciler.failedSteps() >= i, 30_000, `failed attempt ${i}`);
    }
    await reconciler.drain();
    const failed = reports.find((o) => o.databaseId === "r-doomed" && o.state === ObservedState.FAILED);
    expect(failed?.message).toContain(`no base backup of ${fx.id} before ${early.toISOString()}`);
    expect(reports.some((o) => o.databaseId === "r-doomed" && o.state === ObservedState.RUNNING)).toBe(false);
    expect(await fx.runtime.list()).not.toContain("r-doomed");
    expect((await readdir(path.join(fx.dataDir, "instances"))).filter((n) => n.startsWith("r-doomed"))).toEqual([]);
  });

  it.runIf(all)("an interrupted fetch (its staging copy left behind) is redone from scratch and never listed", async () => {
    const staging = path.join(fx.dataDir, "instances", "r-fetch.tmp-0badf00d");
    await mkdir(path.join(staging, "base"), { recursive: true });
    await writeFile(path.join(staging, "PG_VERSION"), `${major}\n`);
    expect(await fx.runtime.list()).not.toContain("r-fetch");
    expect(await fx.runtime.observe("r-fetch")).toEqual({ state: "absent" });
    const port = await restore("r-fetch", between);
    expect(existsSync(staging)).toBe(false);
    expect(await ids(port)).toEqual(batch1);
  });

  /**
   * Runs a staged restore's recovery with the server binaries alone, as a
   * server left behind by a killed agent would, until it has shut down at its
   * target (`-c recovery_target_action=shutdown`) or promoted.
   */
  async function runServerAlone(id: string, until: "shut down" | "promoted", extra = ""): Promise<void> {
    const bins = findServerBinaries().get(major)!;
    const dir = instanceDir(id);
    const logFile = path.join(fx.dataDir, `${id}.alone.log`);
    await writeFile(logFile, "");
    // As the instance's own user (its data directory's owner), with a socket directory of its own.
    const owner = await stat(dir);
    const user = { ...runAs, uid: owner.uid, gid: owner.gid };
    const sockets = path.join(fx.dataDir, `${id}.alone-sockets`);
    await mkdir(sockets, { recursive: true, mode: 0o700 });
    if (user.switchUser) for (const p of [logFile, sockets]) await chown(p, user.uid, user.gid);
    // The staged data directory still has the source's dbaas.conf (the agent rewrites it at every start it makes):
    // its log directory is the source's, so the server alone logs to its -l file instead.
    const o = `-c port=${await freePort()} -c listen_addresses= -c unix_socket_directories=${sockets} -c ssl=off -c archive_mode=off -c logging_collector=off ${extra}`;
    // pg_ctl counts the server as started once recovery begins (and fails if it has already ended at its target).
    await runCommand(bins.pgCtl, ["-D", dir, "-l", logFile, "-w", "-t", "60", "-o", o, "start"], { runAs: user }).catch(() => {});
    const pidFile = path.join(dir, "postmaster.pid");
    const deadline = Date.now() + 30_000;
    for (;;) {
      const pid = await readFile(pidFile, "utf8").catch(() => undefined);
      if (until === "shut down" ? pid === undefined : pid?.split("\n")[7]?.trim() === "ready") return;
      if (Date.now() > deadline) throw new Error(`${id} has not ${until}: ${await readFile(logFile, "utf8")}`);
      await sleep(50);
    }
  }

  it.runIf(all)("a recovery cut short before promotion resumes on the next start", async () => {
    await fx.runtime.create("r-cut", { version: major, restore: restoreTo(between) });
    await runServerAlone("r-cut", "shut down", "-c recovery_target_action=shutdown");
    expect(existsSync(path.join(instanceDir("r-cut"), "recovery.signal"))).toBe(true);
    expect((await fx.runtime.observe("r-cut")).state).toBe("stopped");
    const s = await settings();
    await fx.runtime.start("r-cut", s);
    expect(await ids(s.port)).toEqual(batch1);
    expect(existsSync(path.join(instanceDir("r-cut"), "dbaas-restore"))).toBe(false);
  });

  it.runIf(all)("a server that promoted while the agent was gone is restarted, cleaned up and only then admits clients", async () => {
    await fx.runtime.create("r-alone", { version: major, restore: restoreTo(between) });
    await runServerAlone("r-alone", "promoted");
    expect(existsSync(path.join(instanceDir("r-alone"), "recovery.signal"))).toBe(false);
    expect(existsSync(path.join(instanceDir("r-alone"), "dbaas-restore", "restore.json"))).toBe(true);
    expect((await fx.runtime.observe("r-alone")).state).toBe("running");
    const s = await settings();
    await fx.runtime.start("r-alone", s);
    expect(await ids(s.port)).toEqual(batch1);
    expect(existsSync(path.join(instanceDir("r-alone"), "dbaas-restore"))).toBe(false);
  });

  // The window relies on it: PostgreSQL's clean shutdown switches to a new WAL file and lets the archiver finish.
  it("a clean stop of the source leaves the WAL it was writing in the store", async () => {
    await query(fx.port, sourcePassword, "INSERT INTO items VALUES (500, 'just before the stop')");
    const seg = String((await fx.sql("SELECT pg_walfile_name(pg_current_wal_insert_lsn()) AS s"))[0]!.s);
    await fx.runtime.stop(fx.id);
    await waitFor(() => fx.store.exists(walKey(fx.id, seg)), 20_000, `${seg} in the store`);
  });

  // Last: the tests above time their targets against the source's WAL, which these would delay.
  it.runIf(storeKind === "file")("the store holds nothing readable: no plain or gzip object, no private key", async () => {
    // The source has a private key, which the old backups carried.
    expect(await readFile(path.join(instanceDir(fx.id), "server.key"), "utf8")).toContain("PRIVATE KEY");
    const raw = createFileStore(fx.storeDir);
    const objects = (await raw.list(`${fx.id}/`)).filter((o) => !o.key.includes("/keys/"));
    expect(objects.map((o) => o.key)).toEqual(expect.arrayContaining([recordKey(fx.id, "bkp-1"), `${fx.id}/base/bkp-1/base.tar.gz`]));
    expect(objects.some((o) => o.key.startsWith(walPrefix(fx.id)))).toBe(true);
    for (const { key } of objects) {
      const bytes = await readFile(path.join(fx.storeDir, key));
      expect(isSealed(bytes), key).toBe(true);
      expect(() => gunzipSync(bytes), key).toThrow();
      expect(bytes.includes("PRIVATE KEY"), key).toBe(false);
      expect(bytes.includes(fx.id), key).toBe(false);
    }
    // Opened, the base backup is a whole data directory without the key.
    const chunks: Buffer[] = [];
    for await (const c of await fx.store.get(`${fx.id}/base/bkp-1/base.tar.gz`)) chunks.push(c as Buffer);
    const tar = gunzipSync(Buffer.concat(chunks));
    const members = execFileSync("tar", ["-t"], { input: tar, maxBuffer: 64 * 1024 * 1024 })
      .toString()
      .split("\n");
    expect(members).toEqual(expect.arrayContaining(["PG_VERSION", "server.crt", "global/pg_control"]));
    expect(members).not.toContain("server.key");
    expect(tar.includes("PRIVATE KEY")).toBe(false);
  });

  it.runIf(storeKind === "file")("restores a backup written before encryption (gzip objects), row by row", async () => {
    // The same backup and WAL, stored the old way (gzip'd tar and WAL, plain JSON) under another source id.
    const raw = createFileStore(fx.storeDir);
    const legacy = `legacy-${fx.id}`;
    for (const { key } of await fx.store.list(`${fx.id}/`)) {
      const chunks: Buffer[] = [];
      for await (const c of await fx.store.get(key)) chunks.push(c as Buffer);
      let body = Buffer.concat(chunks);
      if (key.endsWith("/backup.json")) body = Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), databaseId: legacy }));
      await raw.put(`${legacy}/${key.slice(fx.id.length + 1)}`, body);
    }
    expect(gunzipSync(await readFile(path.join(fx.storeDir, legacy, "base", "bkp-1", "base.tar.gz"))).includes("PG_VERSION")).toBe(true);
    const s = await settings();
    await fx.runtime.create("r-legacy", { version: major, restore: { sourceDatabaseId: legacy, restoreTime: between } });
    await fx.runtime.start("r-legacy", s);
    expect(await ids(s.port)).toEqual(batch1);
  });
});
