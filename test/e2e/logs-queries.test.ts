/**
 * Issue 24, the server's log and query insights on the real stack, through the public API (every answer checked
 * against the OpenAPI document) and the `dbaas` CLI: a failed query found in the log by its text with SQLSTATE
 * 42P01 (and a tail that sees it arrive); no password in any entry; a repeated query at the top of /queries by
 * calls, and reset; a viewer reads both but cannot reset; another organization gets 404; the running agent keeps
 * the log within the tier's quota.
 */
import { execFile, spawn } from "node:child_process";
import { chown, mkdtemp, open, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { type Api, waitRunning } from "../support/backups.ts";
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
let key: string;
let db: { id: string; connection_string: string };

beforeAll(async () => {
  [meta, smtp, home] = await Promise.all([createTestDatabase("e2e_logs"), startSmtpServer(), mkdtemp(join(tmpdir(), "dbaas-logs-"))]);
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1", env: { SMTP_URL: smtp.url } });
  api = await account(stack, "logs");
  const created = await api.post("/v1/databases", { name: "logs", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);
  db = created.body.data;
  await waitRunning(api, db.id);
  key = (await api.post("/v1/organization/api-keys", { name: "cli" })).body.data.secret;
}, 240_000);

afterAll(async () => {
  await stack?.destroy();
  await Promise.all([meta?.drop(), smtp?.stop(), home && rm(home, { recursive: true, force: true })]);
});

const cliEnv = () => {
  const { DBAAS_TOKEN: _t, DBAAS_URL: _u, XDG_CONFIG_HOME: _x, ...env } = process.env;
  return { ...env, HOME: home, DBAAS_URL: stack.baseUrl, DBAAS_TOKEN: key };
};
async function dbaas(args: string[]) {
  try {
    const { stdout, stderr } = await run(DBAAS, args, { env: cliEnv(), timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** Polls `probe` every 250 ms until it answers something, for at most `ms`. */
async function eventually<T>(probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

type Entry = { severity: string; message: string; sql_state: string | null; statement: string | null; user: string | null };

describe("logs", { timeout: 180_000 }, () => {
  it("a failed query is found by its text with SQLSTATE 42P01; a tail with next_cursor sees it arrive", async () => {
    const tail = await api.get(`/v1/databases/${db.id}/logs?limit=5`);
    expect(tail.status, JSON.stringify(tail.body)).toBe(200);
    await expect(query(db.connection_string, "SELECT * FROM no_such_table_e2e")).rejects.toThrow(/does not exist/);
    const found = await eventually(async () => {
      const res = await api.get(`/v1/databases/${db.id}/logs?severity=error&q=no_such_table_e2e`);
      expect(res.status).toBe(200);
      return res.body.data.entries.length > 0 ? (res.body.data.entries as Entry[]) : undefined;
    });
    expect(found[found.length - 1]).toMatchObject({
      severity: "ERROR",
      sql_state: "42P01",
      message: 'relation "no_such_table_e2e" does not exist',
      statement: "SELECT * FROM no_such_table_e2e",
      user: "dbadmin",
    });
    const after = await api.get(`/v1/databases/${db.id}/logs?cursor=${tail.body.data.next_cursor}&limit=1000`);
    expect((after.body.data.entries as Entry[]).some((e) => e.sql_state === "42P01")).toBe(true);
    // Paging back from the newest entries reaches older ones, each page oldest first.
    const newest = await api.get(`/v1/databases/${db.id}/logs?limit=2`);
    const older = await api.get(`/v1/databases/${db.id}/logs?limit=2&cursor=${newest.body.data.prev_cursor}`);
    expect(older.status).toBe(200);
    expect(older.body.data.entries.length).toBeGreaterThan(0);
    expect(Date.parse(older.body.data.entries.at(-1).time)).toBeLessThanOrEqual(Date.parse(newest.body.data.entries[0].time));
  });

  it("no password in any entry: a role's ALTER … PASSWORD that fails is masked, one that succeeds is not logged", async () => {
    const c = await connectCustomer(db.connection_string);
    try {
      await c.query("CREATE ROLE e2e_app LOGIN PASSWORD 'E2e-Secret-Created'");
      await c.query("ALTER ROLE e2e_app PASSWORD 'E2e-Secret-Altered'");
      await c.query("ALTER ROLE e2e_nobody PASSWORD 'E2e-Secret-Failed'").catch(() => {});
    } finally {
      await c.end();
    }
    const res = await eventually(async () => {
      const r = await api.get(`/v1/databases/${db.id}/logs?q=e2e_nobody`);
      return r.body.data.entries.length > 0 ? r : undefined;
    });
    expect(res.body.data.entries.at(-1).statement).toBe("ALTER ROLE e2e_nobody PASSWORD '[redacted]'");
    const everything = JSON.stringify((await api.get(`/v1/databases/${db.id}/logs?limit=1000`)).body);
    expect(everything).not.toContain("E2e-Secret");
    expect((await api.get(`/v1/databases/${db.id}/logs?q=E2e-Secret`)).body.data.entries).toEqual([]);
    const refused = await api.get(`/v1/databases/${db.id}/logs?severity=loud`);
    expect(refused.status).toBe(422);
  });

  it("dbaas databases logs: filters, JSON, and --follow printing a line written after it started", async () => {
    const shown = await dbaas(["databases", "logs", db.id, "--severity", "error", "--search", "no_such_table_e2e"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(
      / ERROR 42P01 dbadmin@defaultdb: relation "no_such_table_e2e" does not exist\n {4}STATEMENT: SELECT \* FROM no_such_table_e2e/,
    );
    const json = JSON.parse((await dbaas(["databases", "logs", db.id, "--limit", "3", "-o", "json"])).stdout);
    expect(json.entries).toHaveLength(3);

    const child = spawn(DBAAS, ["databases", "logs", db.id, "--follow", "--search", "followed_table_e2e"], {
      env: { ...cliEnv(), DBAAS_FOLLOW_INTERVAL_MS: "300" },
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    try {
      await new Promise((r) => setTimeout(r, 1500));
      await expect(query(db.connection_string, "SELECT * FROM followed_table_e2e")).rejects.toThrow();
      await eventually(async () => (out.includes('relation "followed_table_e2e" does not exist') ? true : undefined));
    } finally {
      child.kill("SIGINT");
    }
    const code = await new Promise<number | null>((r) => child.on("exit", r));
    expect(code).toBe(0);
  });
});

describe("query insights", { timeout: 180_000 }, () => {
  it("a repeated query is at the top by calls, in normalized text; reset starts again", async () => {
    const c = await connectCustomer(db.connection_string);
    try {
      await c.query("CREATE TABLE orders (id int)");
      for (let i = 0; i < 40; i++) await c.query(`SELECT * FROM orders WHERE id = ${i}`);
    } finally {
      await c.end();
    }
    const res = await api.get(`/v1/databases/${db.id}/queries?order_by=calls&limit=5`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const top = res.body.data.queries[0];
    expect(top).toMatchObject({ query: "SELECT * FROM orders WHERE id = $1", user: "dbadmin", database: "defaultdb" });
    expect(top.calls).toBeGreaterThanOrEqual(40);
    expect(top.mean_time_ms).toBeCloseTo(top.total_time_ms / top.calls, 6);
    expect(JSON.stringify(res.body)).not.toContain("E2e-Secret");
    const byTime = await api.get(`/v1/databases/${db.id}/queries`);
    const times = byTime.body.data.queries.map((q: { total_time_ms: number }) => q.total_time_ms);
    expect(times).toEqual([...times].sort((a: number, b: number) => b - a));

    const table = await dbaas(["databases", "queries", "list", db.id, "--order-by", "calls", "--limit", "1"]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^CALLS\s+TOTAL_MS\s+MEAN_MS/m);
    expect(table.stdout).toContain("SELECT * FROM orders WHERE id = $1");

    expect((await dbaas(["databases", "queries", "reset", db.id])).stdout).toContain("Query statistics reset.");
    const after = await api.get(`/v1/databases/${db.id}/queries?order_by=calls&limit=100`);
    expect(after.body.data.queries.find((q: { query: string }) => q.query.includes("FROM orders"))).toBeUndefined();
    expect(after.body.data.stats_reset).not.toBeNull();
  });
});

describe("who may", { timeout: 120_000 }, () => {
  it("a viewer reads the log and the queries but cannot reset; another organization gets 404", async () => {
    const email = `logs-viewer-${Date.now()}@example.com`;
    expect((await api.post("/v1/organization/members", { email, role: "viewer" })).status).toBe(201);
    const token = invitationToken(await smtp.waitForMail((m) => m.to.includes(email), 30_000));
    const viewer = createApi(stack.baseUrl);
    const accepted = await viewer.post("/v1/invitations/accept", { token, name: "Viewer", password: "correct horse battery staple" });
    expect(accepted.status).toBe(201);
    viewer.setToken(accepted.body.data.access_token);
    expect((await viewer.get(`/v1/databases/${db.id}/logs?limit=5`)).status).toBe(200);
    expect((await viewer.get(`/v1/databases/${db.id}/queries`)).status).toBe(200);
    const refused = await viewer.post(`/v1/databases/${db.id}/queries/reset`);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("insufficient_permissions");

    const other = createApi(stack.baseUrl);
    await other.signup("logs-other");
    for (const res of [
      await other.get(`/v1/databases/${db.id}/logs`),
      await other.get(`/v1/databases/${db.id}/queries`),
      await other.post(`/v1/databases/${db.id}/queries/reset`),
    ])
      expect(res.status).toBe(404);
  });
});

describe("retention", { timeout: 180_000 }, () => {
  it("the running agent drops the oldest log files beyond the tier's quota (micro: 256 MB), within its minute", async () => {
    const dir = join(stack.dataDir, "agents", "agent-fsn1", "server-logs", db.id);
    const name = (t: number) => `postgresql-${new Date(t).toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-")}.json`;
    const owner = await stat(dir);
    // Older files as the server would have left them: a 300 MB one from three hours ago (sparse: no disk used, its size
    // counts), and a small one from two hours ago that the quota leaves room for.
    const big = name(Date.now() - 3 * 3_600_000);
    const small = name(Date.now() - 2 * 3_600_000);
    await writeFile(join(dir, big), "", { mode: 0o600 });
    const h = await open(join(dir, big), "r+");
    await h.truncate(300 * 1024 * 1024);
    await h.close();
    const at = new Date(Date.now() - 2 * 3_600_000).toISOString().replace("T", " ").replace("Z", " UTC");
    await writeFile(
      join(dir, small),
      `${JSON.stringify({ timestamp: at, pid: 1, error_severity: "LOG", message: "kept by retention", backend_type: "postmaster" })}\n`,
      { mode: 0o600 },
    );
    for (const f of [big, small]) await chown(join(dir, f), owner.uid, owner.gid);
    // The agent's log keeper passes every minute (LOG_PRUNE_INTERVAL_MS).
    const deadline = Date.now() + 150_000;
    while ((await readdir(dir)).includes(big)) {
      if (Date.now() > deadline) throw new Error(`${big} (300 MB) still in ${dir} 150 s later`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const left = await readdir(dir);
    expect(left).toContain(small);
    expect(
      left.some((f) => f > small),
      "the server's own, newest file",
    ).toBe(true);
    const found = await api.get(`/v1/databases/${db.id}/logs?q=${encodeURIComponent("kept by retention")}&limit=5`);
    expect(found.status).toBe(200);
    expect(found.body.data.entries.map((e: { message: string }) => e.message)).toEqual(["kept by retention"]);
  });
});
