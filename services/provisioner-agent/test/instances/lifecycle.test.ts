import { existsSync } from "node:fs";
import path from "node:path";
import { tierSpec } from "@dbaas/catalogue";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InstanceManager } from "../../src/instances/instance-manager.ts";
import {
  connect as login,
  freePort,
  query,
  randomPassword,
  scramVerifier,
  startHost,
  startInstance,
  type TestHost,
} from "../support/fixture.ts";

const HOST = "db-lifecycle.example.test";

/** A customer's client with `ssl` as given (the fixture's connect, in this file's order of arguments). */
function connect(port: number, password: string, ssl: pg.ClientConfig["ssl"], user = "dbadmin"): Promise<pg.Client> {
  return login(port, password, { ssl, user });
}

describe("instance lifecycle (PostgreSQL 17)", { timeout: 60_000 }, () => {
  let host: TestHost;
  let dataDir: string;
  let m: InstanceManager;
  let port: number;
  let password: string;
  const id = "life1";

  beforeAll(async () => {
    host = await startHost("life");
    ({ dataDir, m } = host);
    ({ port, password } = await startInstance(host, id, { hostname: HOST }));
  }, 60_000);

  afterAll(() => host?.close(), 60_000);

  it("accepts dbadmin over TLS with the password behind the verifier", async () => {
    const rows = await query(port, password, "SELECT 1 AS one, current_user AS u, current_database() AS db");
    expect(rows).toEqual([{ one: 1, u: "dbadmin", db: "defaultdb" }]);
  });

  it("gives dbadmin CREATEDB/CREATEROLE but not superuser, and owns defaultdb", async () => {
    const rows = await query(
      port,
      password,
      "SELECT rolsuper, rolcreatedb, rolcreaterole, (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'defaultdb') AS owner FROM pg_roles WHERE rolname = current_user",
    );
    expect(rows).toEqual([{ rolsuper: false, rolcreatedb: true, rolcreaterole: true, owner: "dbadmin" }]);
  });

  it("limits a session's temporary files to 20 % of the tier's storage, a limit the customer cannot lift", async () => {
    // micro: 10 GB of storage, so 2 GiB of temporary files (temp_file_limit counts kB).
    const limitKb = Math.round(tierSpec("micro").storageGb * 0.2 * 1024 * 1024);
    expect(await query(port, password, "SELECT setting, unit, source FROM pg_settings WHERE name = 'temp_file_limit'")).toEqual([
      { setting: String(limitKb), unit: "kB", source: "configuration file" },
    ]);
    // A superuser-only setting: neither a session nor the database's owner can raise it.
    await expect(query(port, password, "SET temp_file_limit = -1")).rejects.toThrow(/permission denied to set parameter "temp_file_limit"/);
    await expect(query(port, password, "ALTER DATABASE defaultdb SET temp_file_limit = -1")).rejects.toThrow(/permission denied/);
  });

  it("verifies as verify-full against the agent CA", async () => {
    const ca = await m.caCertificatePem();
    const c = await connect(port, password, { ca, servername: HOST });
    try {
      expect((await c.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")).rows[0]).toEqual({ ssl: true });
    } finally {
      await c.end();
    }
    // The same CA must not vouch for a name the certificate does not cover.
    await expect(connect(port, password, { ca, servername: "other.example.test" })).rejects.toThrow(/altnames|Hostname/i);
  });

  it("refuses connections without TLS", async () => {
    await expect(connect(port, password, false)).rejects.toThrow(/no encryption|pg_hba\.conf rejects/);
  });

  it("refuses the agent superuser over TCP", async () => {
    await expect(connect(port, "", { rejectUnauthorized: false }, "dbaas_agent")).rejects.toThrow(/rejects connection|password/);
  });

  it("applyPassword: old password refused, new accepted", async () => {
    const next = randomPassword();
    await m.applyPassword(id, scramVerifier(next));
    await expect(query(port, password, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    expect(await query(port, next, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
    password = next;
  });

  it("rejects a malformed verifier instead of storing it as a plaintext password", async () => {
    await expect(m.applyPassword(id, "hunter2")).rejects.toThrow(/SCRAM-SHA-256/);
    expect(await query(port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("start() on a running instance with the same settings only re-applies the password", async () => {
    const before = await m.observe(id);
    const next = randomPassword();
    await m.start(id, { port, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(next) });
    const after = await m.observe(id);
    expect(after.state).toBe("running");
    expect(after.pid).toBe(before.pid);
    await expect(query(port, password, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    password = next;
    expect(await query(port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("restart with a bigger tier changes shared_buffers and max_connections", async () => {
    const [small] = await query(port, password, "SELECT current_setting('shared_buffers') AS sb, current_setting('max_connections') AS mc");
    const next = randomPassword();
    await m.restart(id, { port, tier: "small", hostname: HOST, scramVerifier: scramVerifier(next) });
    // A restarted instance must only know the verifier it was started with.
    await expect(query(port, password, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    password = next;
    const [big] = await query(port, password, "SELECT current_setting('shared_buffers') AS sb, current_setting('max_connections') AS mc");
    expect(big!.sb).not.toBe(small!.sb);
    expect(Number(big!.mc)).toBeGreaterThan(Number(small!.mc));
    const sizes = (s: string) => Number.parseInt(s, 10) * (s.endsWith("GB") ? 1024 : s.endsWith("kB") ? 1 / 1024 : 1);
    expect(sizes(String(big!.sb))).toBeGreaterThan(sizes(String(small!.sb)));
  });

  it("applyTier resizes (stop, start with new settings)", async () => {
    const before = await m.observe(id);
    await m.applyTier(id, { port, tier: "medium", hostname: HOST, scramVerifier: scramVerifier(password) });
    const after = await m.observe(id);
    expect(after.pid).not.toBe(before.pid);
    const [row] = await query(port, password, "SELECT current_setting('max_connections') AS mc");
    expect(row).toEqual({ mc: "200" });
  });

  it("stop: connections refused, observe() = stopped, stop again is a no-op", async () => {
    await m.stop(id);
    expect(await m.observe(id)).toEqual({ state: "stopped" });
    await expect(query(port, password, "SELECT 1")).rejects.toThrow(/ECONNREFUSED/);
    await m.stop(id);
  });

  it("starts again after stop, keeping data", async () => {
    await m.start(id, { port, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) });
    await query(port, password, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)");
    await m.restart(id, { port, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) });
    expect(await query(port, password, "SELECT v FROM kept")).toEqual([{ v: 42 }]);
  });

  it("serializes concurrent operations on one instance", async () => {
    const v = scramVerifier(password);
    const o = { port, tier: "micro", hostname: HOST, scramVerifier: v };
    await Promise.all([m.stop(id), m.start(id, o), m.stop(id), m.start(id, o), m.applyPassword(id, v)]);
    expect((await m.observe(id)).state).toBe("running");
    expect(await query(port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("purge removes the instance; observe() = absent; purge again is a no-op", async () => {
    const other = "life2";
    const p2 = await freePort();
    await m.provision(other, { major: "17" });
    await m.start(other, { port: p2, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) });
    expect(await m.listInstances()).toEqual([id, other]);
    await m.purge(other);
    expect(existsSync(path.join(dataDir, "instances", other))).toBe(false);
    expect(existsSync(m.logPath(other))).toBe(false);
    expect(await m.observe(other)).toEqual({ state: "absent" });
    expect(await m.listInstances()).toEqual([id]);
    await m.purge(other);
    expect(await query(port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });
});
