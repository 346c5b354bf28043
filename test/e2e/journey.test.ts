/**
 * The walking skeleton's customer journey, end to end against the real stack
 * as `npm start` runs it (embedded metadata PostgreSQL, every service its own
 * process) and a real PostgreSQL 17 instance per database.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor, waitStatus } from "../support/api.ts";
import { query } from "../support/pgclient.ts";
import { restartStack, startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let api: ReturnType<typeof createApi>;

beforeAll(async () => {
  stack = await startStack();
  api = createApi(stack.baseUrl);
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
});

describe("walking skeleton journey", () => {
  let db: any;
  let account: Awaited<ReturnType<typeof api.signup>>;

  it("keeps the stack's generated secrets in files only their owner reads (0600)", () => {
    // The runner generates them on a first start (deploy/local/stack.ts): services' shared secret, the agents'
    // replication secret, the backups' encryption key, the metadata PostgreSQL's password.
    for (const name of ["internal-auth-secret", "agent-replication-secret", "backup-encryption-key", "metadata-password"]) {
      const st = statSync(join(stack.dataDir, name));
      expect(st.mode & 0o777, name).toBe(0o600);
      expect(st.size, name).toBeGreaterThan(0);
    }
  });

  it("signs up and logs in", async () => {
    account = await api.signup("journey");
    expect(account.organization.plan).toBe("free");
    const login = await api.post("/v1/auth/token", { email: account.email, password: account.password });
    expect(login.status).toBe(200);
    expect(login.body.data.token_type).toBe("Bearer");
    expect(new Date(login.body.data.expires_at).getTime()).toBeGreaterThan(Date.now() + 50 * 60_000);
    api.setToken(login.body.data.access_token);
  });

  it("creates a database with every field of the create response", async () => {
    const res = await api.post("/v1/databases", { name: "orders", region: "fsn1", tier: "micro" });
    expect(res.status).toBe(201);
    db = res.body.data;
    expect(res.body.meta.request_id).toMatch(/\S/);
    expect(db).toMatchObject({
      name: "orders",
      type: "postgres",
      region: "fsn1",
      tier: "micro",
      version: "17",
      status: "provisioning",
      database: "defaultdb",
      username: "dbadmin",
    });
    expect(db.id).toMatch(/^db-[a-z0-9]+$/);
    expect(db.host).toMatch(new RegExp(`^${db.id}\\.`));
    expect(Number.isInteger(db.port)).toBe(true);
    expect(db.password.length).toBeGreaterThanOrEqual(24);
    expect(db.connection_string).toBe(`postgresql://dbadmin:${db.password}@${db.host}:${db.port}/defaultdb?sslmode=require`);
    expect(new Date(db.created_at).toISOString()).toBe(db.created_at);
  });

  it("shows running only once the real server accepts connections, and a client can query it over TLS", { timeout: 75_000 }, async () => {
    await waitStatus(api, db.id, "running", 60_000, () => stack.output());
    const rows = await query(
      db.connection_string,
      "SELECT current_user AS u, version() AS v, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    expect(rows[0].u).toBe("dbadmin");
    expect(rows[0].v).toMatch(/^PostgreSQL 17\./);
    expect(rows[0].ssl).toBe(true);
  });

  it("refuses a wrong password and a connection without TLS", async () => {
    const wrong = db.connection_string.replace(db.password, "not-the-password");
    await expect(query(wrong, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    const url = new URL(db.connection_string);
    const plain = new pg.Client({
      host: "127.0.0.1",
      port: Number(url.port),
      user: "dbadmin",
      password: db.password,
      database: "defaultdb",
      ssl: false,
    });
    await expect(plain.connect()).rejects.toThrow();
  });

  it("gets the record with the password masked", async () => {
    const res = await api.get(`/v1/databases/${db.id}`);
    expect(res.status).toBe(200);
    const got = res.body.data;
    expect(got.password).toBeUndefined();
    expect(got.connection_string).toBe(`postgresql://dbadmin:********@${db.host}:${db.port}/defaultdb?sslmode=require`);
    expect(got).toMatchObject({ id: db.id, type: "postgres", host: db.host, port: db.port, database: "defaultdb", username: "dbadmin" });
    expect(got.updated_at).toBeTruthy();
  });

  it("needs a payment method beyond the free allowance (402), and not after adding a card", async () => {
    const refused = await api.post("/v1/databases", { name: "analytics", region: "nbg1", tier: "small" });
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe("payment_required");
    expect(refused.body.error.message).toMatch(/payment method/);
    expect((await api.get("/v1/databases")).body.meta.total).toBe(1);
    const card = await api.addPaymentMethod();
    expect(card).toMatchObject({ type: "card", default: true });
    const created = await api.post("/v1/databases", { name: "analytics", region: "nbg1", tier: "small" });
    expect(created.status).toBe(201);
  });

  it("lists only the list fields, with paging meta and filters", async () => {
    const all = await api.get("/v1/databases");
    expect(all.status).toBe(200);
    expect(all.body.meta).toMatchObject({ page: 1, per_page: 20, total: 2, total_pages: 1 });
    for (const item of all.body.data.databases) {
      expect(Object.keys(item).sort()).toEqual(["created_at", "id", "name", "region", "status", "tier", "version"]);
    }
    const byRegion = await api.get("/v1/databases?region=nbg1");
    expect(byRegion.body.data.databases.map((d: any) => d.name)).toEqual(["analytics"]);
    const byStatus = await api.get("/v1/databases?status=running&per_page=1");
    expect(byStatus.body.data.databases.map((d: any) => d.id)).toEqual([db.id]);
    expect(byStatus.body.meta).toMatchObject({ per_page: 1, total: 1, total_pages: 1 });
  });

  it("meters compute time in billing through the outbox", async () => {
    const usage = await waitFor(
      async () => {
        const res = await api.get("/v1/billing/usage");
        return res.status === 200 && res.body.data.usage.compute.hours > 0 ? res.body.data : undefined;
      },
      30_000,
      "compute hours",
    );
    expect(usage.currency).toBe("USD");
    // Amounts are a running meter rounded to 4 decimals: hours × the micro tier's 0.02 USD.
    expect(Math.abs(usage.usage.compute.amount - usage.usage.compute.hours * 0.02)).toBeLessThanOrEqual(0.0001);
    expect(usage.total).toBeGreaterThanOrEqual(usage.usage.compute.amount);
    expect(usage.period.start < usage.period.end).toBe(true);
  });

  it("answers bad input with the documented errors", async () => {
    const malformed = await api.call("POST", "/v1/databases", "{not json", { "content-type": "application/json" });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe("validation_error");

    const missing = await api.post("/v1/databases", {});
    expect(missing.status).toBe(422);
    expect(missing.body.error.details.map((d: any) => d.field).sort()).toEqual(["name", "region", "tier"]);

    const wrongType = await api.post("/v1/databases", { name: 42, region: "fsn1", tier: "micro" });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.error.details[0].field).toBe("name");

    const invalid = await api.post("/v1/databases", { name: "ab", region: "mars1", tier: "huge", version: "9" });
    expect(invalid.status).toBe(422);
    const byField = Object.fromEntries(invalid.body.error.details.map((d: any) => [d.field, d.message]));
    expect(Object.keys(byField).sort()).toEqual(["name", "region", "tier", "version"]);
    expect(byField.region).toContain("fsn1");
    expect(byField.tier).toContain("micro");
    expect(byField.version).toContain("17");

    const tooLong = await api.post("/v1/databases", { name: "x".repeat(64), region: "fsn1", tier: "micro" });
    expect(tooLong.status).toBe(422);

    const unauth = await api.call("GET", "/v1/databases", undefined, { authorization: "Bearer nope" });
    expect(unauth.status).toBe(401);
    expect(unauth.body.error.code).toBe("invalid_token");

    const unknown = await api.get("/v1/databases/db-doesnotexist");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("resource_not_found");

    for (const pp of ["0", "101"]) {
      const res = await api.get(`/v1/databases?per_page=${pp}`);
      expect(res.status).toBe(422);
    }
  });

  it("hides one organization's databases from another", async () => {
    const other = createApi(stack.baseUrl);
    await other.signup("other");
    expect((await other.get(`/v1/databases/${db.id}`)).status).toBe(404);
    expect((await other.get("/v1/databases")).body.data.databases).toEqual([]);
  });

  // The stop (30 s is generous), the restart (ready within 120 s) and the instance back (60 s): the test's own
  // timeout covers its waits, so one that sticks fails naming itself.
  it("stops everything on Ctrl-C and brings the same databases back on the next start", {
    timeout: 30_000 + 120_000 + 60_000,
  }, async () => {
    const pids = await Promise.all(["identity", "billing", "databases", "agent-fsn1", "gateway"].map((s) => stack.pid(s)));
    expect(await stack.stop()).toBe(0);
    const url = new URL(db.connection_string);
    await expect(query(db.connection_string, "SELECT 1")).rejects.toThrow();
    // Every service process is gone, and so is every PostgreSQL server of the stack.
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    const leftovers = readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(stack.dataDir);
        } catch {
          return false;
        }
      });
    expect(leftovers).toEqual([]);
    expect(Number(url.port)).toBe(db.port);

    stack = await restartStack(stack);
    api = createApi(stack.baseUrl);
    const login = await api.post("/v1/auth/token", { email: account.email, password: account.password });
    api.setToken(login.body.data.access_token);
    await waitFor(
      async () => {
        await query(db.connection_string, "SELECT 1");
        return true;
      },
      60_000,
      "instance back",
      { everyMs: 100 },
    );
    expect((await api.get(`/v1/databases/${db.id}`)).body.data.status).toBe("running");
  });
});
