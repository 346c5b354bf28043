/**
 * Issue 24, inside a database, on the real stack through the public API (every answer checked against the
 * OpenAPI document) and the `dbaas` CLI: roles (psql logs in with a created role's password, the role cannot
 * become superuser, is gone after delete, a reset ends its sessions), a second logical database reachable,
 * configuration (work_mem and statement_timeout visible in a new session when the PATCH answers, a restart-only
 * parameter pending until a restart, settings and roles surviving a resize and a restore), extensions (pg_trgm
 * installed and removed, plpython3u refused), who may (a viewer
 * reads but cannot change; another organization gets 404).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { type Api, waitFirstBackup, waitRestorableThrough, waitRunning } from "../support/backups.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { connectCustomer, query } from "../support/pgclient.ts";
import { account } from "../support/replicas.ts";
import { invitationToken, type SmtpServer, startSmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../..");
const DBAAS = join(root, "node_modules/.bin/dbaas");

let stack: Stack;
let meta: TestDatabase;
let smtp: SmtpServer;
let home: string;
let api: Api;
let db: { id: string; host: string; port: number; password: string; connection_string: string };

beforeAll(async () => {
  [meta, smtp, home] = await Promise.all([createTestDatabase("e2e_inside"), startSmtpServer(), mkdtemp(join(tmpdir(), "dbaas-inside-"))]);
  // A 1 s backup schedule and a 5 s archive timeout: the first backup, and a restore window reaching now, within seconds.
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: { SMTP_URL: smtp.url, BACKUP_SCHEDULE_INTERVAL_MS: "1000", BACKUP_ARCHIVE_TIMEOUT_S: "5" },
  });
  api = await account(stack, "inside");
  const created = await api.post("/v1/databases", { name: "inside", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);
  db = created.body.data;
  await waitRunning(api, db.id);
}, 240_000);

afterAll(async () => {
  await stack?.destroy();
  await Promise.all([meta?.drop(), smtp?.stop(), home && rm(home, { recursive: true, force: true })]);
});

/** psql (Debian's client) with a connection string the API answered, to 127.0.0.1: `*.localhost` may not resolve. */
async function psql(connectionString: string, sql: string): Promise<{ ok: boolean; out: string }> {
  const url = `${connectionString}&hostaddr=127.0.0.1&connect_timeout=5`;
  try {
    const { stdout } = await run("psql", [url, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql], { timeout: 30_000 });
    return { ok: true, out: stdout.trim() };
  } catch (err) {
    return { ok: false, out: String((err as { stderr?: string }).stderr ?? err) };
  }
}

/** A connection string to logical database `dbname` from one to defaultdb. */
const onDb = (connectionString: string, dbname: string) => connectionString.replace("/defaultdb?", `/${dbname}?`);

describe("roles", { timeout: 120_000 }, () => {
  let role: { name: string; password: string; connection_string: string };

  it("a role created through the API logs in with psql and cannot become superuser", async () => {
    const res = await api.post(`/v1/databases/${db.id}/roles`, { name: "bi_reader" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    role = res.body.data;
    expect(role).toMatchObject({ name: "bi_reader", login: true, builtin: false });
    expect(role.connection_string).toBe(`postgresql://bi_reader:${role.password}@${db.host}:${db.port}/defaultdb?sslmode=require`);
    expect(await psql(role.connection_string, "SELECT current_user")).toEqual({ ok: true, out: "bi_reader" });
    const escalate = await psql(role.connection_string, "ALTER ROLE bi_reader SUPERUSER");
    expect(escalate.ok).toBe(false);
    expect(escalate.out).toMatch(/permission denied|must be superuser/i);
    const attrs = await query(
      db.connection_string,
      "SELECT rolsuper, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = 'bi_reader'",
    );
    expect(attrs).toEqual([{ rolsuper: false, rolreplication: false, rolbypassrls: false }]);
    // dbadmin grants it what it may read, as owners do.
    await query(db.connection_string, "CREATE TABLE sales (n int); INSERT INTO sales VALUES (1), (2); GRANT SELECT ON sales TO bi_reader");
    expect(await psql(role.connection_string, "SELECT count(*) FROM sales")).toEqual({ ok: true, out: "2" });
  });

  it("lists roles by name with dbadmin, never a password", async () => {
    const res = await api.get(`/v1/databases/${db.id}/roles`);
    expect(res.status).toBe(200);
    expect(res.body.data.roles.map((r: { name: string }) => r.name)).toEqual(["bi_reader", "dbadmin"]);
    expect(JSON.stringify(res.body)).not.toContain(role.password);
    expect(res.body.meta).toMatchObject({ total: 2, page: 1 });
  });

  it("reset-password: the old password and its open sessions end before the answer", async () => {
    const open = await connectCustomer(role.connection_string);
    const ended = new Promise<Error>((r) => open.on("error", r));
    const res = await api.post(`/v1/databases/${db.id}/roles/bi_reader/reset-password`);
    expect(res.status).toBe(200);
    expect((await ended).message).toMatch(/terminat/i);
    await open.end().catch(() => {});
    expect((await psql(role.connection_string, "SELECT 1")).ok).toBe(false);
    role = res.body.data;
    expect(await psql(role.connection_string, "SELECT current_user")).toEqual({ ok: true, out: "bi_reader" });
  });

  it("is gone after delete; dbadmin cannot be deleted", async () => {
    await query(db.connection_string, "REVOKE ALL ON sales FROM bi_reader");
    expect((await api.delete(`/v1/databases/${db.id}/roles/bi_reader`)).status).toBe(204);
    const after = await psql(role.connection_string, "SELECT 1");
    expect(after.ok).toBe(false);
    expect(after.out).toMatch(/password authentication failed|does not exist/);
    expect((await api.delete(`/v1/databases/${db.id}/roles/dbadmin`)).status).toBe(409);
    expect((await api.delete(`/v1/databases/${db.id}/roles/bi_reader`)).status).toBe(404);
  });

  it("a name that is not a plain identifier is 422 naming the field", async () => {
    const res = await api.post(`/v1/databases/${db.id}/roles`, { name: "Robert'); DROP TABLE students;--" });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(["name"]);
  });
});

describe("logical databases", { timeout: 120_000 }, () => {
  it("a second database is reachable, owned by a role; it goes with delete", async () => {
    const owner = (await api.post(`/v1/databases/${db.id}/roles`, { name: "app" })).body.data;
    const res = await api.post(`/v1/databases/${db.id}/dbs`, { name: "app_data", owner: "app" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ name: "app_data", owner: "app", builtin: false });
    expect((await psql(onDb(owner.connection_string, "app_data"), "CREATE TABLE t (x int)")).ok).toBe(true);
    expect(await psql(onDb(owner.connection_string, "app_data"), "SELECT current_database()")).toEqual({ ok: true, out: "app_data" });
    const list = await api.get(`/v1/databases/${db.id}/dbs`);
    expect(list.body.data.dbs.map((d: { name: string }) => d.name)).toEqual(["app_data", "defaultdb"]);
    const busy = await connectCustomer(onDb(db.connection_string, "app_data"));
    try {
      const refused = await api.delete(`/v1/databases/${db.id}/dbs/app_data`);
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toContain("open connection");
    } finally {
      await busy.end();
    }
    expect((await api.delete(`/v1/databases/${db.id}/dbs/app_data`)).status).toBe(204);
    expect((await psql(onDb(owner.connection_string, "app_data"), "SELECT 1")).ok).toBe(false);
    expect((await api.delete(`/v1/databases/${db.id}/dbs/defaultdb`)).status).toBe(409);
  });
});

describe("configuration", { timeout: 240_000 }, () => {
  const config = async (id = db.id) => {
    const res = await api.get(`/v1/databases/${id}/config`);
    expect(res.status).toBe(200);
    return Object.fromEntries(res.body.data.parameters.map((p: { name: string }) => [p.name, p])) as Record<string, any>;
  };
  const show = async (name: string, connectionString = db.connection_string) =>
    (await query(connectionString, `SELECT current_setting('${name}') AS v`))[0].v;

  it("work_mem and statement_timeout: visible in a new session when the PATCH answers", async () => {
    const before = await config();
    expect(before.work_mem).toMatchObject({ unit: "kB", type: "integer", overridden: false, min: 64, max: 262144 });
    expect(before.max_connections).toMatchObject({ value: 50, max: 50, requires_restart: true });
    const res = await api.patch(`/v1/databases/${db.id}/config`, { parameters: { work_mem: "64MB", statement_timeout: "2s" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await show("work_mem")).toBe("64MB");
    expect(await show("statement_timeout")).toBe("2s");
    const slow = await psql(db.connection_string, "SELECT pg_sleep(3)");
    expect(slow.ok).toBe(false);
    expect(slow.out).toContain("canceling statement due to statement timeout");
  });

  it("a restart-only parameter is pending until a restart", async () => {
    const res = await api.patch(`/v1/databases/${db.id}/config`, { parameters: { max_connections: 40 } });
    expect(res.status).toBe(200);
    const mc = res.body.data.parameters.find((p: { name: string }) => p.name === "max_connections");
    expect(mc).toMatchObject({ value: 40, pending_restart: true, overridden: true });
    expect(await show("max_connections")).toBe("50");
    expect((await api.post(`/v1/databases/${db.id}/restart`)).status).toBe(200);
    await waitRunning(api, db.id);
    expect((await config()).max_connections).toMatchObject({ value: 40, pending_restart: false });
    expect(await show("max_connections")).toBe("40");
  });

  it("refuses a value outside the tier's bounds or a parameter not on the allowlist (422 naming each), changing nothing", async () => {
    const res = await api.patch(`/v1/databases/${db.id}/config`, {
      parameters: { work_mem: "8MB", max_connections: 500, log_statement: "all" },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual([
      "parameters.max_connections",
      "parameters.log_statement",
    ]);
    expect(await show("work_mem")).toBe("64MB");
  });

  it("custom settings and roles survive a resize and a restore", async () => {
    const role = (await api.post(`/v1/databases/${db.id}/roles`, { name: "kept" })).body.data;
    expect((await api.post(`/v1/databases/${db.id}/resize`, { tier: "small" })).status).toBe(200);
    await waitRunning(api, db.id);
    expect(await show("work_mem")).toBe("64MB");
    expect(await show("max_connections")).toBe("40");
    expect((await config()).max_connections.max).toBe(100);

    await waitFirstBackup(api, db.id);
    await waitRestorableThrough(api, db.id, new Date());
    const restored = await api.post(`/v1/databases/${db.id}/restore`, { name: "inside-restored" });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    const copy = restored.body.data;
    await waitRunning(api, copy.id, "running", 180_000);
    const cfg = await config(copy.id);
    expect(cfg.work_mem).toMatchObject({ value: 65536, overridden: true });
    expect(cfg.max_connections).toMatchObject({ value: 40, overridden: true });
    expect(await show("work_mem", copy.connection_string)).toBe("64MB");
    expect(await show("statement_timeout", copy.connection_string)).toBe("2s");
    const roleOnCopy = role.connection_string.replace(`@${db.host}:${db.port}/`, `@${copy.host}:${copy.port}/`);
    expect(await psql(roleOnCopy, "SELECT current_user")).toEqual({ ok: true, out: "kept" });
    expect((await api.get(`/v1/databases/${copy.id}/roles`)).body.data.roles.map((r: { name: string }) => r.name)).toContain("kept");
  });
});

describe("extensions", { timeout: 120_000 }, () => {
  it("pg_trgm installed and removed; plpython3u refused", async () => {
    const list = await api.get(`/v1/databases/${db.id}/extensions?per_page=100`);
    expect(list.status).toBe(200);
    const trgm = list.body.data.extensions.find((e: { name: string }) => e.name === "pg_trgm");
    expect(trgm).toMatchObject({ installed: false, installed_version: null, trusted: true, allowed: true });
    const made = await api.post(`/v1/databases/${db.id}/extensions`, { name: "pg_trgm" });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.data).toMatchObject({ installed: true, installed_version: trgm.default_version });
    expect(await psql(db.connection_string, "SELECT similarity('postgres', 'postgis') > 0.3")).toEqual({ ok: true, out: "t" });
    expect((await api.delete(`/v1/databases/${db.id}/extensions/pg_trgm`)).status).toBe(204);
    expect((await psql(db.connection_string, "SELECT similarity('a', 'b')")).ok).toBe(false);
    const refused = await api.post(`/v1/databases/${db.id}/extensions`, { name: "plpython3u" });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details[0]).toMatchObject({ field: "name" });
    expect((await psql(db.connection_string, "SELECT count(*) FROM pg_extension WHERE extname = 'plpython3u'")).out).toBe("0");
  });
});

describe("who may", { timeout: 120_000 }, () => {
  it("a viewer reads but cannot change; another organization gets 404", async () => {
    const email = `inside-viewer-${Date.now()}@example.com`;
    expect((await api.post("/v1/organization/members", { email, role: "viewer" })).status).toBe(201);
    const token = invitationToken(await smtp.waitForMail((m) => m.to.includes(email), 30_000));
    const viewer = createApi(stack.baseUrl);
    const accepted = await viewer.post("/v1/invitations/accept", { token, name: "Viewer", password: "correct horse battery staple" });
    expect(accepted.status).toBe(201);
    viewer.setToken(accepted.body.data.access_token);
    expect((await viewer.get(`/v1/databases/${db.id}/roles`)).status).toBe(200);
    expect((await viewer.get(`/v1/databases/${db.id}/dbs`)).status).toBe(200);
    expect((await viewer.get(`/v1/databases/${db.id}/config`)).status).toBe(200);
    expect((await viewer.get(`/v1/databases/${db.id}/extensions`)).status).toBe(200);
    for (const res of [
      await viewer.patch(`/v1/databases/${db.id}/config`, { parameters: { work_mem: "1MB" } }),
      await viewer.post(`/v1/databases/${db.id}/extensions`, { name: "citext" }),
      await viewer.post(`/v1/databases/${db.id}/roles`, { name: "sneaky" }),
      await viewer.post(`/v1/databases/${db.id}/dbs`, { name: "sneaky" }),
      await viewer.delete(`/v1/databases/${db.id}/roles/app`),
      await viewer.post(`/v1/databases/${db.id}/roles/app/reset-password`),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe("insufficient_permissions");
    }
    const other = createApi(stack.baseUrl);
    await other.signup("inside-other");
    for (const res of [
      await other.get(`/v1/databases/${db.id}/roles`),
      await other.get(`/v1/databases/${db.id}/dbs`),
      await other.post(`/v1/databases/${db.id}/roles`, { name: "theirs" }),
      await other.delete(`/v1/databases/${db.id}/dbs/defaultdb`),
      await other.get(`/v1/databases/${db.id}/config`),
      await other.patch(`/v1/databases/${db.id}/config`, { parameters: { work_mem: "1MB" } }),
    ]) {
      expect(res.status).toBe(404);
    }
  });
});

describe("dbaas databases roles|dbs", { timeout: 120_000 }, () => {
  let key: string;
  beforeAll(async () => {
    key = (await api.post("/v1/organization/api-keys", { name: "cli" })).body.data.secret;
  });
  const dbaas = async (args: string[]) => {
    const { DBAAS_TOKEN: _t, DBAAS_URL: _u, XDG_CONFIG_HOME: _x, ...env } = process.env;
    try {
      const { stdout, stderr } = await run(DBAAS, args, {
        env: { ...env, HOME: home, DBAAS_URL: stack.baseUrl, DBAAS_TOKEN: key },
        timeout: 60_000,
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
    }
  };

  it("creates, lists, resets and deletes roles and dbs, in tables and JSON", async () => {
    const made = await dbaas(["databases", "roles", "create", db.id, "--name", "cli_role", "-o", "json"]);
    expect(made.code, made.stderr).toBe(0);
    const role = JSON.parse(made.stdout);
    expect(role).toMatchObject({ name: "cli_role", login: true });
    expect(await psql(role.connection_string, "SELECT current_user")).toEqual({ ok: true, out: "cli_role" });
    const table = await dbaas(["databases", "roles", "list", db.id]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^NAME\s+LOGIN\s+CREATE_DB/m);
    expect(table.stdout).toMatch(/^cli_role\s+true\s+false/m);
    const reset = await dbaas(["databases", "roles", "reset-password", db.id, "cli_role", "-o", "json"]);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout).password).not.toBe(role.password);
    const dbMade = await dbaas(["databases", "dbs", "create", db.id, "--name", "cli_db", "--owner", "cli_role"]);
    expect(dbMade.code, dbMade.stderr).toBe(0);
    expect(dbMade.stdout).toMatch(/owner:\s+cli_role/);
    expect(
      JSON.parse((await dbaas(["databases", "dbs", "list", db.id, "-o", "json"])).stdout).map((d: { name: string }) => d.name),
    ).toContain("cli_db");
    expect((await dbaas(["databases", "dbs", "delete", db.id, "cli_db"])).stdout).toContain("Deleted database cli_db.");
    expect((await dbaas(["databases", "roles", "delete", db.id, "cli_role"])).stdout).toContain("Deleted role cli_role.");
    const refused = await dbaas(["databases", "roles", "delete", db.id, "dbadmin"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("resource_conflict, HTTP 409");
  });

  it("config get|set|reset: a table, JSON, pending restarts named, refusals with their fields", async () => {
    const table = await dbaas(["databases", "config", "get", db.id]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^NAME\s+VALUE\s+DEFAULT\s+UNIT\s+RESTART/m);
    expect(table.stdout).toMatch(/^work_mem\s+65536\s+\d+\s+kB/m);
    const set = await dbaas(["databases", "config", "set", db.id, "lock_timeout=3s", "shared_buffers=64MB"]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/^lock_timeout\s+3000\s+0\s+ms/m);
    expect(set.stdout).toContain("Pending a restart ('dbaas databases restart'): shared_buffers.");
    expect(await query(db.connection_string, "SELECT current_setting('lock_timeout') AS v")).toEqual([{ v: "3s" }]);
    const json = JSON.parse((await dbaas(["databases", "config", "reset", db.id, "lock_timeout", "shared_buffers", "-o", "json"])).stdout);
    expect(json.parameters.find((p: { name: string }) => p.name === "lock_timeout")).toMatchObject({ overridden: false });
    const bad = await dbaas(["databases", "config", "set", db.id, "max_connections=9999"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("parameters.max_connections: must be between 10 and 100 on the small tier");
    expect((await dbaas(["databases", "config", "set", db.id, "oops"])).code).toBe(2);
  });

  it("extensions list|install|delete", async () => {
    const made = await dbaas(["databases", "extensions", "install", db.id, "citext"]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toMatch(/installed:\s+true/);
    const installed = await dbaas(["databases", "extensions", "list", db.id, "--installed"]);
    expect(installed.stdout).toMatch(/^citext\s+[\d.]+\s+[\d.]+\s+true\s+true/m);
    expect(installed.stdout).not.toMatch(/^pg_trgm/m);
    expect((await dbaas(["databases", "extensions", "delete", db.id, "citext"])).stdout).toContain("Dropped extension citext.");
    const refused = await dbaas(["databases", "extensions", "install", db.id, "plperlu"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("validation_error, HTTP 422");
  });
});
