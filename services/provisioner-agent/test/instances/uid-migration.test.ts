import { execFile } from "node:child_process";
import { chmod, lstat, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInstanceManager, type InstanceManager } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { resolveRunAs } from "../../src/instances/run-as.ts";
import type { InstanceRuntime } from "../../src/runtime.ts";
import { query, startHost, startInstance, type TestHost, type TestInstance } from "../support/fixture.ts";

// Servers from before per-server users: an agent of that time ran every server as the shared run-as user (nobody),
// so their data directories, spools, socket directories and logs are that user's. Such a server gets a uid of its own
// from AGENT_TENANT_UID_RANGE, everything of it chowned: at agent start if it is stopped (the previous agent stopped
// it on its way out), else at its next start. Root only (chown, and servers as other users).

const run = promisify(execFile);
const RANGE = [200_000, 299_999] as const;
const nobody = resolveRunAs("nobody");

/** Every path under `dir` (itself included), symbolic links not followed. */
async function walk(dir: string): Promise<string[]> {
  const out = [dir];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

describe.skipIf(process.getuid?.() !== 0)("servers from before per-server users get a uid of their own", { timeout: 240_000 }, () => {
  let host: TestHost;
  let old1: TestInstance;
  let old2: TestInstance;
  let m: InstanceManager | undefined;
  let runtime: InstanceRuntime;
  let secret: string;

  const dirOf = (id: string) => path.join(host.dataDir, "instances", id);
  /** What a server of that time owned: data directory, WAL spool (with a segment waiting), socket directory, log. */
  const filesOf = (id: string) => ({
    data: dirOf(id),
    spool: path.join(host.runtime.walSpoolRoot, id),
    socket: path.join(host.m.socketDir, id),
    log: path.join(host.dataDir, "instances", `${id}.log`),
  });

  /** Makes stopped instance `id` look as that agent left it: all of it the shared user's, a WAL segment in its spool. */
  async function makeShared(id: string, owner: { uid: number; gid: number } = nobody): Promise<void> {
    const f = filesOf(id);
    await writeFile(path.join(f.spool, "000000010000000000000042"), "wal");
    await run("chown", ["-R", `${owner.uid}:${owner.gid}`, f.data, f.spool, f.socket, f.log]);
    await chmod(f.log, 0o644);
    // A link its user planted (a tenant could write there): the hand-over must change the link, not what it names.
    await rm(path.join(f.data, "planted"), { force: true });
    await symlink(secret, path.join(f.data, "planted"));
    await run("chown", ["-h", `${owner.uid}:${owner.gid}`, path.join(f.data, "planted")]);
  }

  /** The uid of its own `id` got: every file of it is that uid's, and its server runs as it. */
  async function expectOwnUser(id: string, others: readonly number[]): Promise<number> {
    const f = filesOf(id);
    const uid = (await stat(f.data)).uid;
    expect(uid).toBeGreaterThanOrEqual(RANGE[0]);
    expect(uid).toBeLessThanOrEqual(RANGE[1]);
    expect(others).not.toContain(uid);
    for (const p of [...(await walk(f.data)), ...(await walk(f.spool)), f.socket, f.log]) {
      const st = await lstat(p);
      expect({ p, uid: st.uid, gid: st.gid }).toEqual({ p, uid, gid: uid });
    }
    expect((await stat(f.log)).mode & 0o777).toBe(0o600);
    // What the planted link names is untouched.
    expect((await stat(secret)).uid).toBe(0);
    const pid = Number((await readFile(path.join(f.data, "postmaster.pid"), "utf8")).split("\n")[0]);
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    expect(/^Uid:\s+(\d+)\s+(\d+)/m.exec(status)!.slice(1).map(Number)).toEqual([uid, uid]);
    return uid;
  }

  beforeAll(async () => {
    host = await startHost("uidmig");
    secret = path.join(os.tmpdir(), `dbaas-uidmig-secret-${process.pid}`);
    await writeFile(secret, "root only", { mode: 0o600 });
    old1 = await startInstance(host, "uidmig-a");
    old2 = await startInstance(host, "uidmig-b");
    for (const db of [old1, old2]) await query(db.port, db.password, "CREATE TABLE kept AS SELECT 42 AS answer");
    await host.m.stopAll();
    for (const db of [old1, old2]) await makeShared(db.id);
  }, 180_000);

  afterAll(async () => {
    await m?.stopAll().catch(() => {});
    await host?.close();
    if (secret) await rm(secret, { force: true });
  }, 60_000);

  it("at agent start: a stopped one is handed a uid of the range, all its files chowned; it starts as it, data intact", async () => {
    expect((await stat(dirOf(old1.id))).uid).toBe(nobody.uid);
    // A new agent process over the same data directory.
    m = createInstanceManager({ dataDir: host.dataDir, agentId: "test-uidmig" });
    runtime = createLocalProcessRuntime(m);
    await runtime.prepare();
    const a = (await stat(dirOf(old1.id))).uid;
    const b = (await stat(dirOf(old2.id))).uid;
    expect(a).not.toBe(nobody.uid);
    expect(b).not.toBe(nobody.uid);
    expect(a).not.toBe(b);
    await runtime.start(old1.id, old1.settings);
    await expectOwnUser(old1.id, [b]);
    expect(await query(old1.port, old1.password, "SELECT answer FROM kept")).toEqual([{ answer: 42 }]);
  });

  it("at its next start too (one an agent found running at its own start keeps the shared user until then)", async () => {
    await makeShared(old2.id);
    expect((await stat(dirOf(old2.id))).uid).toBe(nobody.uid);
    // No agent start in between: the start itself hands it over.
    await runtime.start(old2.id, old2.settings);
    await expectOwnUser(old2.id, [(await stat(dirOf(old1.id))).uid]);
    expect(await query(old2.port, old2.password, "SELECT answer FROM kept")).toEqual([{ answer: 42 }]);
  });

  it("a server of a uid outside the range (the range changed: the local stack's agents got a slice each) gets one of the range", async () => {
    const foreign = { uid: 350_123, gid: 350_123 };
    await runtime.stop(old1.id);
    await makeShared(old1.id, foreign);
    // A new agent process over the same data directory: the stopped server is handed a uid of the range at its start.
    await m!.stopAll();
    m = createInstanceManager({ dataDir: host.dataDir, agentId: "test-uidmig" });
    runtime = createLocalProcessRuntime(m);
    await runtime.prepare();
    expect((await stat(dirOf(old1.id))).uid).not.toBe(foreign.uid);
    await runtime.start(old1.id, old1.settings);
    await runtime.start(old2.id, old2.settings);
    await expectOwnUser(old1.id, [(await stat(dirOf(old2.id))).uid, foreign.uid]);
    expect(await query(old1.port, old1.password, "SELECT answer FROM kept")).toEqual([{ answer: 42 }]);
  });
});
