/**
 * Issue 22: the connection pooler on real instances (docs/product.md, Trusted sources and connection
 * pooling). Every database gets Debian's PgBouncer on `<id>-pooler.<domain>` at its own port: the
 * database's username and password log in (SCRAM, verify-full with the CA for the pooler's name);
 * 1,000 clients at once are all served in transaction mode by a micro (max_connections 50) while as
 * many direct connections are refused; session mode keeps a prepared statement; its bytes reach the
 * usage report's data transfer; trusted sources apply to it; a kill -9 of PgBouncer or of the agent
 * needs no API request to be served again; it stops and starts with its database.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Client } from "@connectrpc/connect";
import { createInternalClient, operatorSecret } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor, waitStatus } from "../support/api.ts";
import { admitted, attempt, refused, untilAttempt } from "../support/edge.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

const run = promisify(execFile);

let stack: Stack;
let meta: TestDatabase;
let billing: Client<typeof BillingService>;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_pooler");
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1", env: { AGENT_SAMPLE_INTERVAL_MS: "1000" } });
  billing = createInternalClient(BillingService, `http://127.0.0.1:${Number(stack.env.PORT) + 3}`, {
    secret: operatorSecret({ ...process.env, DBAAS_DATA_DIR: stack.dataDir }),
    caller: "support",
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

const withPassword = (cs: string, password: string) => cs.replace(":********@", `:${encodeURIComponent(password)}@`);

/** A session through `cs` (127.0.0.1 with the host name as TLS server name; verify-full with `ca`). */
async function connect(cs: string, ca?: string): Promise<pg.Client> {
  const url = new URL(cs);
  const c = new pg.Client({
    host: "127.0.0.1",
    port: Number(url.port),
    user: url.username,
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1),
    ssl: ca ? { ca, servername: url.hostname } : { rejectUnauthorized: false },
    connectionTimeoutMillis: 30_000,
  });
  c.on("error", () => {});
  await c.connect();
  return c;
}

/** Opens `n` sessions, `batch` at a time, all held open; each outcome is a client or the error's code. */
async function openMany(cs: string, n: number, batch = 100): Promise<{ clients: pg.Client[]; errors: string[] }> {
  const clients: pg.Client[] = [];
  const errors: string[] = [];
  for (let i = 0; i < n; i += batch) {
    const round = await Promise.allSettled(Array.from({ length: Math.min(batch, n - i) }, () => connect(cs)));
    for (const r of round) {
      if (r.status === "fulfilled") clients.push(r.value);
      else errors.push((r.reason as { code?: string; message: string }).code ?? (r.reason as Error).message);
    }
  }
  return { clients, errors };
}

const pgbouncerPid = (dbId: string) =>
  Number(readFileSync(join(stack.dataDir, "agents", "agent-fsn1", "poolers", dbId, "pgbouncer.pid"), "utf8").trim());
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

describe("the connection pooler on real instances", { timeout: 600_000 }, () => {
  const api = () => apiClient;
  let apiClient: ReturnType<typeof createApi>;
  let db: { id: string; password: string; connection_string: string };
  let pooled: string;
  let ca: string;
  let organizationId: string;

  it("every database has one on its own host name: verify-full with the CA, the database's password", async () => {
    apiClient = createApi(stack.baseUrl);
    await apiClient.signup("pool");
    organizationId = (await apiClient.get("/v1/organization")).body.data.id;
    const created = await api().post("/v1/databases", { name: "pooled", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    db = created.body.data;
    await waitStatus(api(), db.id, "running", 120_000, stack.output);
    const p = await api().get(`/v1/databases/${db.id}/pooler`);
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({
      enabled: true,
      mode: "transaction",
      pool_size: 20,
      max_client_connections: 1000,
      host: `${db.id}-pooler.db.localhost`,
    });
    expect(p.body.data.port).not.toBe(new URL(db.connection_string).port);
    pooled = withPassword(p.body.data.connection_string, db.password);
    ca = (await api().get(`/v1/databases/${db.id}/ca-certificate`)).body as string;
    await untilAttempt("the pooler admits", "127.0.0.1", pooled, admitted, 60_000, ca);
    const c = await connect(pooled, ca);
    try {
      expect((await c.query("SELECT current_user AS u, current_database() AS d")).rows[0]).toEqual({ u: "dbadmin", d: "defaultdb" });
    } finally {
      await c.end();
    }
    // The certificate is the pooler's: the database's own name does not match it.
    await expect(connect(pooled.replace(`${db.id}-pooler.`, `${db.id}.`), ca)).rejects.toThrow(/altnames|Hostname/i);
    // libpq (Debian's psql 15) too: verify-full against the pooler's name, SCRAM against the one-iteration verifier.
    const dir = await mkdtemp(join(tmpdir(), "dbaas-pooler-ca-"));
    try {
      await writeFile(join(dir, "ca.pem"), ca);
      const url = new URL(pooled);
      const conninfo = `host=${url.hostname} hostaddr=127.0.0.1 port=${url.port} user=dbadmin dbname=defaultdb sslmode=verify-full sslrootcert=${join(dir, "ca.pem")}`;
      const { stdout } = await run("psql", ["-X", "-Atc", "SELECT current_user || ' over ' || current_setting('ssl')", conninfo], {
        env: { ...process.env, PGPASSWORD: db.password },
        timeout: 30_000,
      });
      expect(stdout.trim()).toBe("dbadmin over on");
      await expect(
        run("psql", ["-X", "-Atc", "SELECT 1", conninfo], { env: { ...process.env, PGPASSWORD: `${db.password}x` }, timeout: 30_000 }),
      ).rejects.toThrow(/SASL authentication failed|password authentication failed/); // PgBouncer says the former
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("serves 1,000 clients at once in transaction mode on a micro; as many direct sessions are refused", async () => {
    const through = await openMany(pooled, 1000);
    try {
      expect(through.errors).toEqual([]);
      expect(through.clients).toHaveLength(1000);
      const answers = await Promise.all(through.clients.map((c, i) => c.query("SELECT $1::int AS i", [i])));
      expect(answers.map((a) => a.rows[0].i)).toEqual(through.clients.map((_, i) => i));
    } finally {
      await Promise.all(through.clients.map((c) => c.end().catch(() => {})));
    }
    const direct = await openMany(db.connection_string.replace(":********@", `:${encodeURIComponent(db.password)}@`), 1000);
    try {
      expect(direct.clients.length).toBeLessThan(50);
      expect(direct.errors.length).toBeGreaterThan(900);
      expect(direct.errors).toContain("53300");
    } finally {
      await Promise.all(direct.clients.map((c) => c.end().catch(() => {})));
    }
  });

  it("session mode keeps a prepared statement; pool_size is bounded by the tier", async () => {
    const bad = await api().patch(`/v1/databases/${db.id}/pooler`, { pool_size: 46 });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details.map((d: { field: string }) => d.field)).toEqual(["pool_size"]);
    const s = await api().patch(`/v1/databases/${db.id}/pooler`, { mode: "session", pool_size: 10 });
    expect(s.status).toBe(200);
    expect(s.body.data).toMatchObject({ mode: "session", pool_size: 10 });
    // The agent rewrites PgBouncer's ini and reloads it (SIGHUP) right after.
    const ini = join(stack.dataDir, "agents", "agent-fsn1", "poolers", db.id, "pgbouncer.ini");
    await waitFor(async () => /^pool_mode = session$/m.test(readFileSync(ini, "utf8")), 30_000, "the pooler's ini in session mode");
    await untilAttempt("the pooler reachable in session mode", "127.0.0.1", pooled, admitted);
    const c = await connect(pooled);
    try {
      const q = { name: "kept", text: "SELECT $1::int * 2 AS n", values: [1] };
      for (let i = 0; i < 5; i++) expect((await c.query({ ...q, values: [i] })).rows[0].n).toBe(i * 2);
    } finally {
      await c.end();
    }
    expect((await api().patch(`/v1/databases/${db.id}/pooler`, { mode: "transaction", pool_size: 20 })).status).toBe(200);
  });

  it("counts its bytes as the database's data transfer", async () => {
    const before = (await billing.getUsage({ organizationId })).dataTransferGb?.quantity ?? 0;
    const c = await connect(pooled);
    let received = 0;
    try {
      for (let i = 0; i < 4; i++) {
        const r = await c.query("SELECT repeat('x', 5000000) AS big");
        received += r.rows[0].big.length;
      }
    } finally {
      await c.end();
    }
    await waitFor(
      async () => ((await billing.getUsage({ organizationId })).dataTransferGb?.quantity ?? 0) - before >= received / 1e9,
      120_000,
      `${received} bytes read through the pooler in the usage report`,
      { everyMs: 1000 },
    );
  });

  it("trusted sources apply to it", async () => {
    const only = await api().post(`/v1/databases/${db.id}/trusted-sources`, { cidr: "127.0.0.6/32" });
    expect(only.status).toBe(201);
    await untilAttempt("127.0.0.5 refused at the pooler", "127.0.0.5", pooled, refused);
    expect(await attempt("127.0.0.6", pooled)).toBe("ok");
    expect((await api().delete(`/v1/databases/${db.id}/trusted-sources/${only.body.data.id}`)).status).toBe(204);
    await untilAttempt("127.0.0.5 admitted at the pooler again", "127.0.0.5", pooled, admitted);
  });

  it("a kill -9 of PgBouncer, then of the agent: served again without a request to the API", async () => {
    const first = pgbouncerPid(db.id);
    process.kill(first, "SIGKILL");
    await waitFor(async () => !alive(first), 10_000, "PgBouncer gone");
    const back = await untilAttempt("the pooler back after its kill -9", "127.0.0.1", pooled, admitted, 60_000);
    const second = pgbouncerPid(db.id);
    expect(second).not.toBe(first);
    console.log(`pooler: PgBouncer killed -9, serving again after ${back.ms} ms`);

    const held = await connect(pooled);
    const registered = () =>
      stack
        .output()
        .split("\n")
        .filter((l) => /^agent-fsn1\s*\| registered/.test(l)).length;
    const registeredBefore = registered();
    process.kill(await stack.pid("agent-fsn1"), "SIGKILL");
    // PgBouncer outlives the agent; a new agent keeps it (same pid) and publishes it again. Polled once the new agent
    // has registered (its start may take the port over a moment later than the old rules stopped serving it).
    await waitFor(async () => registered() > registeredBefore, 120_000, "the agent back and registered");
    await untilAttempt("the pooler serving after the agent's kill -9", "127.0.0.1", pooled, admitted, 120_000);
    expect(pgbouncerPid(db.id)).toBe(second);
    expect(alive(second)).toBe(true);
    await held.end().catch(() => {});
  });

  it("stops and starts with its database", async () => {
    const pid = pgbouncerPid(db.id);
    expect((await api().post(`/v1/databases/${db.id}/stop`)).status).toBe(200);
    await waitStatus(api(), db.id, "stopped", 120_000, stack.output);
    await waitFor(async () => !alive(pid), 30_000, "PgBouncer stopped with its database");
    expect(await attempt("127.0.0.1", pooled)).not.toBe("ok");
    expect((await api().post(`/v1/databases/${db.id}/start`)).status).toBe(200);
    await waitStatus(api(), db.id, "running", 120_000, stack.output);
    await untilAttempt("the pooler back with its database", "127.0.0.1", pooled, admitted, 60_000);
  });
});
