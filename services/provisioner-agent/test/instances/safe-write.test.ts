import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, copyFile, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { finishRestore, readRestoreMarker, restoreDir } from "../../src/backups/recovery-state.ts";
import { ensureOwnedDir, prepareLogFile, serverFilesOf, writeOwned } from "../../src/instances/files.ts";
import type { RunAsIdentity } from "../../src/instances/run-as.ts";
import { type AgentCA, ensureServerCertificate, issueServerCertificate, loadOrCreateCA } from "../../src/instances/tls.ts";

// docs/product.md, "Tenant isolation on an agent host": the agent (root) trusts nothing a tenant uid can write. A server's
// user owns its data directory, so while the agent writes there it may swap any name for a symbolic link (inotify
// tells it when). Here a real process of a tenant uid (setpriv) does exactly that, and a file of root's (standing
// for /etc/shadow or the agent's CA key) must come out untouched: owner, mode and bytes. Root only (chown, setpriv).

/** Temp names (`<file>.tmp-<hex>`) are random; `pin.value` fixes them, so a link can be planted where one will be. */
const pin = vi.hoisted(() => ({ value: undefined as string | undefined }));
vi.mock("../../src/temp-name.ts", async (importOriginal) => {
  const orig = await importOriginal<typeof import("../../src/temp-name.ts")>();
  return { rand: () => pin.value ?? orig.rand() };
});

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
/** A uid of the default AGENT_TENANT_UID_RANGE no test host allocates (they start at its bottom). */
const TENANT_UID = 299_000 + (process.pid % 900);
const tenant: RunAsIdentity = { user: `uid ${TENANT_UID}`, uid: TENANT_UID, gid: TENANT_UID, switchUser: true };

/**
 * The tenant's side: watches `dir` (inotify) and, for every temp name the agent creates there, puts a link to
 * `target` in its place and under the names of that write's companions (openssl's key and certificate). Prints
 * "ready" once watching and how many names it replaced when it gets SIGTERM.
 */
const ATTACKER = `
const fs = require("node:fs");
const path = require("node:path");
const [dir, target] = process.argv.slice(2);
let swapped = 0;
const plant = (name) => {
  const p = path.join(dir, name);
  try { fs.unlinkSync(p); } catch {}
  try { fs.symlinkSync(target, p); swapped++; } catch {}
};
fs.watch(dir, (_ev, name) => {
  if (!name) return;
  const m = /\\.tmp-([0-9a-f]+)$/.exec(name);
  if (!m) return;
  try { if (fs.lstatSync(path.join(dir, name)).isSymbolicLink()) return; } catch {}
  plant(name);
  for (const f of [".server.key", ".server.crt", "server.key", "server.crt"]) plant(f + ".tmp-" + m[1]);
});
process.on("SIGTERM", () => { console.log("swapped " + swapped); process.exit(0); });
console.log("ready");
`;

describe.skipIf(process.getuid?.() !== 0 || !SETPRIV)(
  "root's writes in a tenant's directory follow no link (root, setpriv)",
  { timeout: 180_000 },
  () => {
    let base: string;
    /** The tenant's directory (its data directory, say): 0700, its own, in a root-owned 0711 parent. */
    let dir: string;
    /** Root's file a link points at: must stay uid 0, 0600, "precious". */
    let target: string;
    let attackerJs: string;
    let attacker: ChildProcess | undefined;
    let ca: AgentCA;

    /** Owner, mode and bytes of `target`: what no write of the agent may change. */
    const targetState = async () => {
      const st = await stat(target);
      return { uid: st.uid, gid: st.gid, mode: (st.mode & 0o7777).toString(8), content: await readFile(target, "utf8") };
    };
    const UNTOUCHED = { uid: 0, gid: 0, mode: "600", content: "precious\n" };

    /** Starts the tenant's process on `dir`; resolves once it watches. */
    async function startAttacker(): Promise<ChildProcess> {
      const child = spawn(
        SETPRIV!,
        [`--reuid=${TENANT_UID}`, `--regid=${TENANT_UID}`, "--clear-groups", process.execPath, attackerJs, dir, target],
        {
          cwd: "/",
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      await new Promise<void>((resolve, reject) => {
        child.once("error", reject);
        child.once("exit", (code) => reject(new Error(`attacker exited with ${code}`)));
        child.stdout!.once("data", () => resolve());
      });
      attacker = child;
      return child;
    }

    /** Stops the tenant's process; resolves with how many names it swapped for links. */
    async function stopAttacker(): Promise<number> {
      const child = attacker;
      attacker = undefined;
      if (!child) return 0;
      const out: Buffer[] = [];
      child.stdout!.on("data", (b: Buffer) => out.push(b));
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      return Number(/swapped (\d+)/.exec(Buffer.concat(out).toString())?.[1] ?? 0);
    }

    beforeAll(async () => {
      base = await mkdtemp(path.join(os.tmpdir(), "dbaas-safewrite-"));
      await chmod(base, 0o711);
      attackerJs = path.join(base, "attacker.cjs");
      await writeFile(attackerJs, ATTACKER);
      await chmod(attackerJs, 0o644);
      const caDir = path.join(base, "ca");
      ca = await loadOrCreateCA(caDir, "safewrite");
    });

    afterAll(async () => {
      await stopAttacker();
      if (base) await rm(base, { recursive: true, force: true });
    });

    let n = 0;
    afterEach(async () => {
      pin.value = undefined;
      await stopAttacker();
    });

    /** A fresh tenant directory and root's target file for each test. */
    async function fresh(): Promise<void> {
      n++;
      dir = path.join(base, `data-${n}`);
      await mkdir(dir, { mode: 0o700 });
      await chown(dir, TENANT_UID, TENANT_UID);
      const secrets = path.join(base, `root-${n}`);
      await mkdir(secrets, { mode: 0o700 });
      target = path.join(secrets, "shadow");
      await writeFile(target, "precious\n", { mode: 0o600 });
    }

    it("writeOwned: a link planted at its temp name is refused, not followed; root's file is untouched", async () => {
      await fresh();
      const file = path.join(dir, "pg_hba.conf");
      pin.value = "0badc0de";
      await symlink(target, `${file}.tmp-0badc0de`);
      await expect(writeOwned(tenant, file, "local all all peer\n")).rejects.toThrow(/refusing to write .*pg_hba\.conf/);
      expect(await targetState()).toEqual(UNTOUCHED);
      expect(existsSync(file)).toBe(false);
      // The next write, under a fresh name, goes through.
      pin.value = undefined;
      await writeOwned(tenant, file, "local all all peer\n");
      const st = await lstat(file);
      expect({ file: st.isFile(), uid: st.uid, mode: (st.mode & 0o777).toString(8) }).toEqual({ file: true, uid: TENANT_UID, mode: "600" });
    });

    it("writeOwned: a tenant process swapping every temp file for a link (inotify) gets nothing of root's", async () => {
      await fresh();
      await startAttacker();
      const file = path.join(dir, "dbaas.conf");
      let refused = 0;
      for (let i = 0; i < 150; i++) await writeOwned(tenant, file, `# round ${i}\n`).catch(() => refused++);
      const swapped = await stopAttacker();
      console.log(`writeOwned under attack: 150 writes, ${swapped} temp names swapped for links, ${refused} writes refused`);
      // The attack ran: the tenant saw the temp files and replaced them.
      expect(swapped).toBeGreaterThan(0);
      expect(await targetState()).toEqual(UNTOUCHED);
    });

    it("a certificate issued into a tenant's directory under attack leaves root's file alone; the pair is the tenant's", async () => {
      await fresh();
      await startAttacker();
      let refused = 0;
      for (let i = 0; i < 30; i++) await issueServerCertificate(ca, "db.example.test", dir, { owner: tenant }).catch(() => refused++);
      const swapped = await stopAttacker();
      console.log(`issueServerCertificate under attack: 30 issues, ${swapped} names swapped for links, ${refused} refused`);
      expect(swapped).toBeGreaterThan(0);
      expect(await targetState()).toEqual(UNTOUCHED);
      // Undisturbed, the pair is written: regular files, the tenant's, 0600/0644.
      await issueServerCertificate(ca, "db.example.test", dir, { owner: tenant });
      for (const [name, mode] of [
        ["server.key", "600"],
        ["server.crt", "644"],
      ] as const) {
        const st = await lstat(path.join(dir, name));
        expect({ name, file: st.isFile(), uid: st.uid, gid: st.gid, mode: (st.mode & 0o777).toString(8) }).toEqual({
          name,
          file: true,
          uid: TENANT_UID,
          gid: TENANT_UID,
          mode,
        });
      }
    });

    it("ensureServerCertificate refuses a valid key behind a link instead of chowning what it points at", async () => {
      await fresh();
      await ensureServerCertificate(ca, "db.example.test", dir, { owner: tenant });
      // Root's file holds the very key (the link makes the certificate check pass): the chown is what would hurt.
      await copyFile(path.join(dir, "server.key"), target);
      await chown(target, 0, 0);
      await chmod(target, 0o600);
      const before = await targetState();
      await rm(path.join(dir, "server.key"));
      await symlink(target, path.join(dir, "server.key"));
      await expect(ensureServerCertificate(ca, "db.example.test", dir, { owner: tenant })).rejects.toThrow(/server\.key.*symbolic link/);
      expect(await targetState()).toEqual(before);
      expect(before.uid).toBe(0);
    });

    it("a restore's cleanup removes a link put in place of the agent's dbaas-restore, not what it points at", async () => {
      await fresh();
      // Root's directory shaped like dbaas-restore: its marker and a wal/ with a file.
      const rootDir = path.dirname(target);
      await mkdir(path.join(rootDir, "wal"), { mode: 0o700 });
      await writeFile(path.join(rootDir, "wal", "000000010000000000000001"), "root's");
      await writeFile(path.join(rootDir, "restore.json"), JSON.stringify({ sourceDatabaseId: "another", backupId: "b", restoreTime: "x" }));
      // The tenant renamed the agent's directory away (its data directory is its own) and put a link in its place.
      await symlink(rootDir, restoreDir(dir));
      const pgConf = path.join(dir, "postgresql.conf");
      await writeOwned(tenant, pgConf, "include_if_exists = 'dbaas-recovery.conf'\n");
      // A marker behind a link is not believed.
      await expect(readRestoreMarker(dir)).rejects.toThrow(/symbolic link/);
      await finishRestore(serverFilesOf(tenant), dir);
      expect(existsSync(restoreDir(dir))).toBe(false);
      expect(await readFile(path.join(rootDir, "wal", "000000010000000000000001"), "utf8")).toBe("root's");
      expect(existsSync(path.join(rootDir, "restore.json"))).toBe(true);
      expect(await targetState()).toEqual(UNTOUCHED);
      expect(await readFile(pgConf, "utf8")).toBe("");
    });

    it("a link in place of the log file or a server directory is refused, never chowned through", async () => {
      await fresh();
      await symlink(target, path.join(dir, "server.log"));
      await expect(prepareLogFile(tenant, path.join(dir, "server.log"))).rejects.toThrow(/symbolic link/);
      await symlink(path.dirname(target), path.join(dir, "spool"));
      await expect(ensureOwnedDir(path.join(dir, "spool"), tenant)).rejects.toThrow(/symbolic link|not a directory/);
      expect(await targetState()).toEqual(UNTOUCHED);
      const d = await stat(path.dirname(target));
      expect({ uid: d.uid, mode: (d.mode & 0o777).toString(8) }).toEqual({ uid: 0, mode: "700" });
    });
  },
);
