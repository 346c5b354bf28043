import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInstanceManager } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { query, randomPassword, scramVerifier, startHost, startInstance, type TestHost, type TestInstance } from "../support/fixture.ts";

// docs/product.md, "Tenant isolation on an agent host": every server its own uid/gid, its files its own (0700/0600),
// another tenant's uid reads none of them nor the agent's CA key, and the agent's role is the agent's alone.
// Each tenant uid is a real process (setpriv), so it needs root and setpriv.

const run = promisify(execFile);
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const RANGE = [200_000, 299_999];

/** Runs `file args` as uid/gid (no supplementary groups); resolves with stdout, rejects with the failure. */
function asUid(uid: number, file: string, ...args: string[]): Promise<string> {
  return run(SETPRIV!, [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", file, ...args], { cwd: "/", timeout: 30_000 }).then(
    (r) => r.stdout,
  );
}

/**
 * A PostgreSQL startup as `user` over the socket `sock`, made by a process of uid `uid`: what the server answers
 * (`R` with code 0: logged in without a password; `E`: its error message), or the socket's own error.
 */
const STARTUP_PROBE = `
const net = require("node:net");
const [sock, user] = process.argv.slice(2);
const params = Buffer.from("user\\0" + user + "\\0database\\0postgres\\0\\0");
const head = Buffer.alloc(8); head.writeInt32BE(8 + params.length, 0); head.writeInt32BE(196608, 4);
const s = net.connect(sock);
s.on("error", (e) => { console.log(JSON.stringify({ socketError: e.code })); process.exit(0); });
s.on("connect", () => s.write(Buffer.concat([head, params])));
let buf = Buffer.alloc(0);
s.on("data", (d) => {
  buf = Buffer.concat([buf, d]);
  if (buf.length < 5) return;
  const type = String.fromCharCode(buf[0]);
  if (type === "R") console.log(JSON.stringify({ auth: buf.readInt32BE(5) }));
  else if (type === "E") {
    const fields = buf.subarray(5).toString("utf8").split("\\0");
    console.log(JSON.stringify({ error: (fields.find((f) => f.startsWith("M")) || "M?").slice(1) }));
  } else console.log(JSON.stringify({ type }));
  s.destroy(); process.exit(0);
});
`;

describe.skipIf(process.getuid?.() !== 0 || !SETPRIV)(
  "tenant isolation: a uid of its own per server (root, setpriv)",
  { timeout: 180_000 },
  () => {
    let host: TestHost;
    let a: TestInstance;
    let b: TestInstance;
    let probe: string;

    const dirOf = (id: string) => path.join(host.dataDir, "instances", id);
    const uidOf = async (p: string) => (await stat(p)).uid;
    const socketDirOf = async (id: string) => (await readFile(path.join(dirOf(id), "postmaster.pid"), "utf8")).split("\n")[4]!.trim();
    const privatePortOf = async (id: string) => Number((await readFile(path.join(dirOf(id), "postmaster.pid"), "utf8")).split("\n")[3]);
    /** What instance `id`'s server owns: data directory, TLS key, WAL spool, socket directory, log. */
    const ownFiles = async (id: string) => ({
      data: dirOf(id),
      key: path.join(dirOf(id), "server.key"),
      spool: path.join(host.runtime.walSpoolRoot, id),
      socket: await socketDirOf(id),
      log: path.join(host.dataDir, "instances", `${id}.log`),
    });
    const startup = async (uid: number, sock: string, user: string) =>
      JSON.parse(await asUid(uid, process.execPath, probe, sock, user)) as { auth?: number; error?: string; socketError?: string };

    beforeAll(async () => {
      host = await startHost("iso");
      a = await startInstance(host, "iso-a");
      b = await startInstance(host, "iso-b");
      probe = path.join(os.tmpdir(), `dbaas-startup-probe-${process.pid}.cjs`);
      await writeFile(probe, STARTUP_PROBE);
      await chmod(probe, 0o644);
    }, 120_000);

    afterAll(async () => {
      await host?.close();
      if (probe) await rm(probe, { force: true });
    }, 60_000);

    it("two servers get two uids of AGENT_TENANT_UID_RANGE, run as them, and own their files alone (0700/0600)", async () => {
      const ua = await uidOf(dirOf(a.id));
      const ub = await uidOf(dirOf(b.id));
      expect(ua).not.toBe(ub);
      for (const [id, uid] of [
        [a.id, ua],
        [b.id, ub],
      ] as const) {
        expect(uid).toBeGreaterThanOrEqual(RANGE[0]!);
        expect(uid).toBeLessThanOrEqual(RANGE[1]!);
        // The postmaster really runs as it (real and effective uid).
        const status = await readFile(`/proc/${await host.postmasterPid(id)}/status`, "utf8");
        expect(/^Uid:\s+(\d+)\s+(\d+)/m.exec(status)!.slice(1).map(Number)).toEqual([uid, uid]);
        const f = await ownFiles(id);
        for (const [what, p] of Object.entries(f)) {
          const st = await stat(p);
          expect({ what, uid: st.uid, gid: st.gid }).toEqual({ what, uid, gid: uid });
          expect({ what, mode: (st.mode & 0o777).toString(8) }).toEqual({ what, mode: st.isDirectory() ? "700" : "600" });
        }
      }
    });

    it("a tenant's uid reads none of another's data directory, key, spool, socket or log, nor the agent's CA key", async () => {
      const ua = await uidOf(dirOf(a.id));
      const ub = await uidOf(dirOf(b.id));
      const caKey = path.join(host.dataDir, "ca", "ca.key");
      expect(existsSync(caKey)).toBe(true);
      for (const [me, other, otherId] of [
        [ua, ub, b.id],
        [ub, ua, a.id],
      ] as const) {
        const f = await ownFiles(otherId);
        // Its own server's user can: the refusals below are the isolation, not a broken command.
        await expect(asUid(other, "/bin/cat", f.key)).resolves.toContain("PRIVATE KEY");
        await expect(asUid(other, "/bin/ls", f.data, f.spool, f.socket)).resolves.toContain("PG_VERSION");
        for (const p of [f.data, f.spool, f.socket]) await expect(asUid(me, "/bin/ls", p)).rejects.toThrow(/Permission denied/);
        for (const p of [f.key, f.log, path.join(f.data, "postgresql.conf"), caKey])
          await expect(asUid(me, "/bin/cat", p)).rejects.toThrow(/Permission denied/);
        // Nor can it connect to the other server's socket.
        const sock = path.join(f.socket, `.s.PGSQL.${await privatePortOf(otherId)}`);
        expect(await startup(me, sock, "dbadmin")).toEqual({ socketError: "EACCES" });
      }
    });

    it("the agent's role: refused to a tenant uid on its own server's socket (peer) and over TCP; the agent gets in", async () => {
      const ua = await uidOf(dirOf(a.id));
      const sock = path.join(await socketDirOf(a.id), `.s.PGSQL.${await privatePortOf(a.id)}`);
      const asTenant = await startup(ua, sock, "dbaas_agent");
      expect(asTenant.auth).toBeUndefined();
      expect(asTenant.error).toMatch(/[Pp]eer authentication failed/);
      // The agent (root, mapped to dbaas_agent) over the same socket.
      expect(await host.asAgent(a.id, "SELECT current_user AS u")).toEqual([{ u: "dbaas_agent" }]);
      for (const port of [await privatePortOf(a.id), a.port]) {
        const c = new pg.Client({ host: "127.0.0.1", port, user: "dbaas_agent", database: "postgres", ssl: { rejectUnauthorized: false } });
        c.on("error", () => {});
        await expect(c.connect()).rejects.toThrow(/rejects connection|no pg_hba\.conf entry|authentication failed/);
        await c.end().catch(() => {});
      }
    });

    it("a tenant cannot point the agent's superuser at a neighbour: not by its socket, not by its postmaster.pid", async () => {
      const ua = await uidOf(dirOf(a.id));
      const pidFile = path.join(dirOf(a.id), "postmaster.pid");
      const original = await readFile(pidFile, "utf8");
      const sockB = path.join(await socketDirOf(b.id), `.s.PGSQL.${await privatePortOf(b.id)}`);
      const next = randomPassword();
      /** B still takes its own password and not the one the agent was asked to give A. */
      const bUntouched = async () => {
        await expect(query(b.port, next, "SELECT 1")).rejects.toThrow(/password authentication failed/);
        expect(await query(b.port, b.password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
      };
      // A's uid rewrites its postmaster.pid to name B's socket directory and port (the pid line kept).
      const lines = original.split("\n");
      lines[3] = String(await privatePortOf(b.id));
      lines[4] = await socketDirOf(b.id);
      await asUid(ua, "/bin/sh", "-c", `printf '%s' "$0" > '${pidFile}'`, lines.join("\n"));
      await expect(host.runtime.setPassword(a.id, scramVerifier(next))).rejects.toThrow(/not running|starting/);
      await bUntouched();
      await writeFile(pidFile, original);
      // A's uid puts a link to B's socket in place of its own (its socket directory is its own).
      const sockA = path.join(await socketDirOf(a.id), `.s.PGSQL.${await privatePortOf(a.id)}`);
      await asUid(ua, "/bin/sh", "-c", `rm -f '${sockA}' && ln -s '${sockB}' '${sockA}'`);
      await expect(host.runtime.setPassword(a.id, scramVerifier(next))).rejects.toThrow(/refusing the agent's session/);
      await bUntouched();
      // A restart gives A its own socket again.
      await host.runtime.restart(a.id, a.settings);
      expect(await host.asAgent(a.id, "SELECT current_setting('port') AS p")).toEqual([{ p: String(await privatePortOf(a.id)) }]);
    });

    it("each server keeps its uid across an agent restart, and a new one takes a free uid", async () => {
      const before = await uidOf(dirOf(a.id));
      const others = new Set([before, await uidOf(dirOf(b.id))]);
      await host.m.stopAll();
      // A new agent process over the same data directory.
      const m = createInstanceManager({ dataDir: host.dataDir, agentId: "test-iso" });
      const runtime = createLocalProcessRuntime(m);
      await runtime.prepare();
      await runtime.start(a.id, a.settings);
      expect(await uidOf(dirOf(a.id))).toBe(before);
      const status = await readFile(`/proc/${await host.postmasterPid(a.id)}/status`, "utf8");
      expect(Number(/^Uid:\s+(\d+)/m.exec(status)![1])).toBe(before);
      await runtime.create("iso-c", { version: "17" });
      expect(others.has(await uidOf(dirOf("iso-c")))).toBe(false);
      await m.stopAll();
    });
  },
);
