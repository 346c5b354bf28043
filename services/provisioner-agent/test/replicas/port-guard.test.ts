import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { create } from "@bufbuild/protobuf";
import { BackupState, DesiredState, type InstanceSpec, InstanceSpecSchema, ReplicaSourceSchema } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { createInstanceManager } from "../../src/instances/instance-manager.ts";
import { nftTableName } from "../../src/proxy/nft-meter.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import { type Fixture, managerFor, shutdown, startFixture, view } from "../backups/support.ts";
import {
  agentSql,
  freePort,
  instanceSpec,
  query,
  randomPassword,
  reconcilerFor,
  running as runningIn,
  scramVerifier,
  waitFor,
} from "../support/fixture.ts";

// The guard of private ports is per port (services/provisioner-agent/README.md, "Connection proxy"): with the
// nftables meter, a process of tenant A's uid (a code execution in A's server) cannot connect over TCP to tenant
// B's private port — nor to A's replica's — while A's replica (a uid of its own) streams from A, A's uid reaches A's
// own port, and published ports admit everyone. Real servers, a real replica, real nftables; the tenants' processes
// are real (setpriv), so it runs as root, and only where the agent meters with nftables.

const run = promisify(execFile);
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const SECRET = "port-guard-test-secret";

/** An SSLRequest to 127.0.0.1:<argv[1]>: prints the server's one-byte answer (S or N), or the socket's error code. */
const SSL_REQUEST = `const s = require("node:net").connect({ host: "127.0.0.1", port: Number(process.argv[1]) });
s.once("connect", () => { const b = Buffer.alloc(8); b.writeInt32BE(8, 0); b.writeInt32BE(80877103, 4); s.write(b); });
s.once("data", (d) => { console.log(String.fromCharCode(d[0])); s.destroy(); process.exit(0); });
s.once("error", (e) => { console.log(e.code || e.message); process.exit(0); });
setTimeout(() => { console.log("timeout"); process.exit(0); }, 10000).unref();`;

/** What a process of `uid` gets when it asks the server on port `port` for TLS: "S" (a PostgreSQL server answered), or the error. */
async function asUid(uid: number, port: number): Promise<string> {
  const r = await run(SETPRIV!, [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", process.execPath, "-e", SSL_REQUEST, String(port)], {
    cwd: "/",
    timeout: 30_000,
  });
  return r.stdout.trim();
}

function nftUsable(): boolean {
  try {
    execFileSync("nft", ["list", "tables"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(process.getuid?.() !== 0 || !SETPRIV || !nftUsable())(
  "the guard of private ports, per port (root, setpriv, nftables)",
  { timeout: 240_000 },
  () => {
    const tag = "pguard";
    const replicaId = `rep-${tag}`;
    const otherId = `db-${tag}b`;
    const slot = `dbaas_rep_${tag}`;
    let fx: Fixture;
    let backups: BackupManager;
    let reconciler: Reconciler;
    let primary: InstanceSpec;
    let other: InstanceSpec;
    let replica: InstanceSpec;
    let password: string;
    const dirOf = (id: string) => path.join(fx.dataDir, "instances", id);
    const uidOf = async (id: string) => (await stat(dirOf(id))).uid;
    const privatePortOf = async (id: string) => Number((await readFile(path.join(dirOf(id), "postmaster.pid"), "utf8")).split("\n")[3]);
    const desire = (specs: InstanceSpec[]) => {
      reconciler.setDesired(specs);
      backups.setDesired(specs);
    };
    const running = (id: string, generation: bigint) => runningIn(reconciler, id, generation);
    const peers = () =>
      execFileSync("nft", ["-j", "list", "set", "ip", nftTableName(fx.dataDir, `test-${tag}`), "local_peers"], { encoding: "utf8" });

    beforeAll(async () => {
      fx = await startFixture(tag, "17", { replicationSecret: SECRET });
      ({ manager: backups } = managerFor(fx));
      await backups.start();
      reconciler = reconcilerFor(fx, { purgeBackups: (id) => backups.purge(id) });
      password = randomPassword();
      primary = create(InstanceSpecSchema, {
        ...fx.spec,
        generation: 2n,
        credentialsGeneration: 2n,
        scramVerifier: scramVerifier(password),
        replicationSlots: [slot],
      });
      other = instanceSpec({ databaseId: otherId, port: await freePort(), scramVerifier: scramVerifier(password) });
      desire([primary, other]);
      const p = await running(fx.id, 2n);
      await running(otherId, 1n);
      // The replica: seeded from a base backup of A, then streaming from A's private port over TCP as its own uid.
      desire([{ ...primary, backupIds: ["bkp-guard"] }, other]);
      const done = await waitFor(
        () => view(backups, fx.id)?.backups.find((b) => b.backupId === "bkp-guard" && b.state !== BackupState.RUNNING),
        90_000,
        "seed backup",
      );
      expect(done.state).toBe(BackupState.COMPLETED);
      replica = instanceSpec({
        databaseId: replicaId,
        port: await freePort(),
        scramVerifier: primary.scramVerifier,
        credentialsGeneration: 2n,
        replicaOf: create(ReplicaSourceSchema, {
          primaryDatabaseId: fx.id,
          primaryHost: fx.spec.host,
          primaryCaPem: await fx.runtime.caCertificatePem(),
          slotName: slot,
          primaryVersion: "17",
          primaryAddress: p.replicationAddress,
          primaryPort: p.replicationPort,
          seedBackupId: "bkp-guard",
        }),
      });
      desire([primary, other, replica]);
      await running(replicaId, 1n);
    }, 200_000);

    afterAll(async () => {
      await reconciler?.drain();
      await shutdown(backups, fx);
    }, 60_000);

    it("a tenant's uid is refused on another tenant's private port; its own server's, its replica's and the published ports let it in", async () => {
      const [a, b, r] = [await uidOf(fx.id), await uidOf(otherId), await uidOf(replicaId)];
      expect(new Set([a, b, r]).size).toBe(3);
      const [pa, pb, pr] = [await privatePortOf(fx.id), await privatePortOf(otherId), await privatePortOf(replicaId)];
      // Straight to another tenant's private port: reset before any server sees it (trusted sources, metering bypassed).
      expect(await asUid(a, pb)).toBe("ECONNREFUSED");
      expect(await asUid(b, pa)).toBe("ECONNREFUSED");
      expect(await asUid(a, pr)).toBe("ECONNREFUSED");
      expect(await asUid(r, pb)).toBe("ECONNREFUSED");
      expect(await asUid(b, pr)).toBe("ECONNREFUSED");
      // What is let through: a server's uid to its own port, the replica's to its primary's.
      expect(await asUid(a, pa)).toBe("S");
      expect(await asUid(r, pa)).toBe("S");
      // Through the published ports, every uid gets to the server (where its password and trusted sources apply).
      expect(await asUid(a, other.port)).toBe("S");
      expect(await asUid(b, fx.port)).toBe("S");
      expect(await query(other.port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
    });

    it("the replica streams from its primary over TCP as its own uid", async () => {
      const [row] = await agentSql(fx.dataDir, fx.id, `SELECT state FROM pg_stat_replication WHERE application_name = '${replicaId}'`);
      expect(row?.state).toBe("streaming");
      await query(fx.port, password, "CREATE TABLE guard_t (x int); INSERT INTO guard_t VALUES (42)");
      await waitFor(
        async () => (await query(replica.port, password, "SELECT x FROM guard_t").catch(() => [])).length === 1,
        30_000,
        "row streamed to the replica",
      );
      const walreceiver = await agentSql(fx.dataDir, replicaId, "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'");
      expect(walreceiver).toHaveLength(1);
      const status = await readFile(`/proc/${Number(walreceiver[0]!.pid)}/status`, "utf8");
      expect(Number(/^Uid:\s+(\d+)/m.exec(status)![1])).toBe(await uidOf(replicaId));
    });

    it("a stopped database's uid leaves the guard; started again, it is back", async () => {
      const b = await uidOf(otherId);
      expect(peers()).toContain(String(b));
      desire([primary, { ...other, desiredState: DesiredState.STOPPED, generation: 2n }, replica]);
      await waitFor(async () => (await fx.runtime.observe(otherId)).state === "stopped", 60_000, "stopped");
      await waitFor(() => !peers().includes(String(b)), 30_000, "its uid gone from local_peers");
      desire([primary, { ...other, generation: 3n }, replica]);
      await running(otherId, 3n);
      expect(peers()).toContain(String(b));
      expect(await asUid(await uidOf(fx.id), await privatePortOf(otherId))).toBe("ECONNREFUSED");
      expect(await asUid(b, await privatePortOf(otherId))).toBe("S");
    });

    it("an agent restart finds the servers running and guards them again, the replica's primary read back from its configuration", async () => {
      const [a, b, r] = [await uidOf(fx.id), await uidOf(otherId), await uidOf(replicaId)];
      const [pa, pb] = [await privatePortOf(fx.id), await privatePortOf(otherId)];
      // The old process's meter goes (its published ports released); a new one takes its table over, empty.
      await reconciler.drain();
      await fx.m.proxy.close();
      const m2 = createInstanceManager({ dataDir: fx.dataDir, agentId: `test-${tag}` });
      try {
        expect(peers()).not.toContain(String(r));
        await m2.serveRunning();
        const elements = (JSON.parse(peers()).nftables as { set?: { elem?: { concat: unknown[] }[] } }[]).find((o) => o.set)!.set!.elem!;
        expect(elements.map((e) => e.concat)).toEqual(
          expect.arrayContaining([
            ["127.0.0.1", pa, a],
            ["127.0.0.1", pa, r],
            ["127.0.0.1", pb, b],
          ]),
        );
        expect(await asUid(r, pa)).toBe("S");
        expect(await asUid(a, pb)).toBe("ECONNREFUSED");
        expect(await asUid(b, pa)).toBe("ECONNREFUSED");
        expect(await query(other.port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
      } finally {
        await m2.proxy.close();
      }
    });
  },
);
