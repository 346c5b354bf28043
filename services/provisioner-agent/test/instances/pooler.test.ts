import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POOLER_LIMITS, poolerSupport } from "../../src/instances/pooler.ts";
import { poolerProcessesBelow } from "../../src/instances/procfs.ts";
import type { PoolerSettings } from "../../src/runtime.ts";
import {
  connect,
  freePort,
  query,
  randomPassword,
  scramVerifier,
  startHost,
  startInstance,
  type TestHost,
  type TestInstance,
} from "../support/fixture.ts";

// The pooler of one database on real processes: Debian's PgBouncer in front of a real server, clients logging in
// with the database's password through SCRAM checked against the verifier alone (and passed through to the server),
// TLS with a certificate for the pooler's own name (verify-full with the agent's CA), transaction and session modes,
// a reload on a new password, a PgBouncer killed -9 started again by the next sync, a stop that unpublishes it.

const PGBOUNCER = process.env.PGBOUNCER_PATH ?? "/usr/sbin/pgbouncer";
const support = poolerSupport(PGBOUNCER);
if (!support.available) console.warn(`pooler tests skipped: ${support.reason}`);

describe("PgBouncer's presence", () => {
  it("a host without it says so, naming the path", () => {
    expect(poolerSupport("/nonexistent/pgbouncer")).toEqual({
      available: false,
      reason: "PgBouncer is not installed on this host (/nonexistent/pgbouncer)",
    });
    expect(poolerSupport("/bin/true")).toMatchObject({ available: false, reason: expect.stringContaining("did not say it is PgBouncer") });
  });
});

describe.skipIf(!support.available)("a database's PgBouncer (real processes)", { timeout: 120_000 }, () => {
  let host: TestHost;
  let db: TestInstance;
  let settings: PoolerSettings;
  const id = "db-pool1";
  const poolerHost = `${id}-pooler.example.test`;

  beforeAll(async () => {
    host = await startHost("pooler", { pgbouncerPath: PGBOUNCER });
    db = await startInstance(host, id);
    settings = {
      mode: "transaction",
      poolSize: 5,
      maxClientConnections: 1000,
      port: await freePort(),
      host: poolerHost,
      scramVerifier: db.settings.scramVerifier,
    };
  }, 120_000);

  afterAll(() => host?.close(), 60_000);

  /** Running, not a zombie left for a reaper that may never come (the daemon's parent is gone). */
  const alive = (pid: number) => {
    try {
      return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      return false;
    }
  };
  const pidOf = () => Number(readFileSync(path.join(host.dataDir, "poolers", id, "pgbouncer.pid"), "utf8").trim());

  it("serves the database's password over verify-full TLS for its own name, with no password on disk", async () => {
    expect(host.m.poolerSupport.available).toBe(true);
    const status = await host.m.syncPooler(id, settings);
    expect(status.running).toBe(true);
    const ca = await host.m.caCertificatePem();
    const c = await connect(settings.port, db.password, { ssl: { ca, servername: poolerHost } });
    try {
      const row = (await c.query("SELECT current_user AS u, current_database() AS d, inet_server_port() IS NULL AS unix")).rows[0];
      expect(row).toEqual({ u: "dbadmin", d: "defaultdb", unix: true });
    } finally {
      await c.end();
    }
    await expect(connect(settings.port, db.password, { ssl: { ca, servername: "other.example.test" } })).rejects.toThrow(
      /altnames|Hostname/i,
    );
    await expect(connect(settings.port, "wrong-password", { ssl: { rejectUnauthorized: false } })).rejects.toThrow(
      /password|SASL|authentication/i,
    );
    await expect(connect(settings.port, db.password, { ssl: false })).rejects.toThrow();
    const auth = readFileSync(path.join(host.dataDir, "poolers", id, "userlist.txt"), "utf8");
    expect(auth).toBe(`"dbadmin" "${db.settings.scramVerifier}"\n`);
    expect(auth).not.toContain(db.password);
  });

  it("transaction mode shares few server connections among many clients; session mode keeps a prepared statement", async () => {
    const clients = await Promise.all(Array.from({ length: 40 }, () => connect(settings.port, db.password)));
    try {
      const answers = await Promise.all(clients.map((c) => c.query("SELECT 1 AS one")));
      expect(answers.every((a) => a.rows[0].one === 1)).toBe(true);
      const backends = await query(
        db.port,
        db.password,
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = 'dbadmin' AND client_addr IS NULL AND pid <> pg_backend_pid()",
      );
      expect(Number(backends[0]!.n)).toBeLessThanOrEqual(settings.poolSize);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    await host.m.syncPooler(id, { ...settings, mode: "session" });
    const c = await connect(settings.port, db.password);
    try {
      // A named protocol-level prepared statement (pg's `name`), used twice: only session mode keeps it between transactions.
      const q = { name: "kept", text: "SELECT $1::int + 1 AS n", values: [1] };
      expect((await c.query(q)).rows[0].n).toBe(2);
      expect((await c.query({ ...q, values: [41] })).rows[0].n).toBe(42);
    } finally {
      await c.end();
    }
    await host.m.syncPooler(id, settings);
  });

  it("takes a new password by reload; a PgBouncer killed -9 is started again by the next sync", async () => {
    const next = randomPassword();
    // One verifier for both, as the spec carries it: SCRAM pass-through needs the server's and the pooler's to be the same.
    const verifier = scramVerifier(next);
    await host.m.applyPassword(id, verifier);
    const pid = pidOf();
    await host.m.syncPooler(id, { ...settings, scramVerifier: verifier });
    expect(pidOf()).toBe(pid);
    await expect(connect(settings.port, db.password)).rejects.toThrow(/password|SASL|authentication/i);
    db.password = next;
    expect(
      await (async () => {
        const c = await connect(settings.port, next);
        try {
          return (await c.query("SELECT 7 AS n")).rows[0].n;
        } finally {
          await c.end();
        }
      })(),
    ).toBe(7);
    settings = { ...settings, scramVerifier: verifier };

    process.kill(pid, "SIGKILL");
    for (let i = 0; i < 100 && alive(pid); i++) await sleep(50);
    const status = await host.m.syncPooler(id, settings);
    expect(status.running).toBe(true);
    expect(status.pid).not.toBe(pid);
    const c = await connect(settings.port, next);
    await c.end();
  });

  it("runs in a cgroup of its own beside its server's, with the pooler's limits; gone when it stops", async (t) => {
    if (host.m.resourceLimits.mode === "none") t.skip();
    expect((await host.m.syncPooler(id, settings)).running).toBe(true);
    expect(readFileSync(`/proc/${pidOf()}/cgroup`, "utf8")).toMatch(new RegExp(`/dbaas-[0-9a-f]{12}/${id}-pooler$`, "m"));
    expect(await host.m.limitStats(`${id}-pooler`)).toMatchObject({
      memoryLimitBytes: POOLER_LIMITS.memoryBytes,
      pidsMax: POOLER_LIMITS.pids,
    });
    expect((await host.m.syncPooler(id, undefined)).running).toBe(false);
    expect(await host.m.limitStats(`${id}-pooler`)).toBeUndefined();
    // The server's own cgroup is untouched.
    expect(await host.m.limitStats(id)).toBeDefined();
  });

  it("one whose pid file was lost is found by its command line: kept (not started twice beside it), then stopped", async () => {
    expect((await host.m.syncPooler(id, settings)).running).toBe(true);
    const pid = pidOf();
    const pidFile = path.join(host.dataDir, "poolers", id, "pgbouncer.pid");
    rmSync(pidFile);
    // The next pass adopts it: the same process, the only PgBouncer of the directory.
    expect((await host.m.syncPooler(id, settings)).pid).toBe(pid);
    expect(poolerProcessesBelow(host.dataDir)).toEqual([pid]);
    const c = await connect(settings.port, db.password);
    await c.end();
    // A stop finds it without its pid file too: nothing left below the agent's directory.
    rmSync(pidFile, { force: true });
    expect((await host.m.syncPooler(id, undefined)).running).toBe(false);
    expect(alive(pid)).toBe(false);
    expect(poolerProcessesBelow(host.dataDir)).toEqual([]);
  });

  it("stopped, it refuses on its port and its process is gone", async () => {
    expect((await host.m.syncPooler(id, settings)).running).toBe(true);
    const pid = pidOf();
    expect((await host.m.syncPooler(id, undefined)).running).toBe(false);
    expect(alive(pid)).toBe(false);
    await expect(connect(settings.port, db.password)).rejects.toThrow();
    expect((await host.m.syncPooler(id, settings)).running).toBe(true);
    await host.m.removePooler(id);
    expect(await host.m.listPoolers()).toEqual([]);
  });
});
