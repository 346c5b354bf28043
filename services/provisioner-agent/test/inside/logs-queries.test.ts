import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, query, startHost, startInstance, type TestHost, type TestInstance, waitFor } from "../support/fixture.ts";
import { adminClient } from "./support.ts";

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "resolved",
    (e: unknown) => Code[ConnectError.from(e).code],
  );

describe("a server's log and query statistics through the agent", { timeout: 180_000 }, () => {
  let host: TestHost;
  let inst: TestInstance;
  let admin: Client<typeof InstanceAdminService>;
  const id = "logs1";

  beforeAll(async () => {
    host = await startHost("logs");
    inst = await startInstance(host, id);
    admin = adminClient(host.runtime);
  }, 120_000);

  afterAll(() => host?.close(), 60_000);

  it("writes jsonlog files owned by the server's user into its log directory, outside its data directory", async () => {
    const dir = path.join(host.dataDir, "server-logs", id);
    const files = await waitFor(async () => {
      const f = (await readdir(dir)).filter((n) => n.endsWith(".json"));
      return f.length > 0 && f;
    });
    expect(files[0]).toMatch(/^postgresql-\d{8}-\d{6}\.json$/);
    const st = await stat(path.join(dir, files[0]!));
    const owner = await stat(path.join(host.dataDir, "instances", id));
    expect(st.uid).toBe(owner.uid);
    expect(st.mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
  });

  it("finds a failed query by its text with its SQLSTATE, and a tail sees what comes next", async () => {
    const tail = await admin.readLogs({ databaseId: id, limit: 10, minSeverity: "", q: "", cursor: "" });
    await query(inst.port, inst.password, "SELECT 1").catch(() => {});
    await expect(query(inst.port, inst.password, "SELECT * FROM no_such_table_in_logs1")).rejects.toThrow(/does not exist/);
    const found = await waitFor(async () => {
      const r = await admin.readLogs({ databaseId: id, limit: 10, minSeverity: "ERROR", q: "no_such_table_in_logs1", cursor: "" });
      return r.entries.length > 0 && r;
    }, 60_000);
    expect(found.entries[0]).toMatchObject({
      severity: "ERROR",
      sqlState: "42P01",
      statement: "SELECT * FROM no_such_table_in_logs1",
      user: "dbadmin",
      database: "defaultdb",
    });
    const next = await admin.readLogs({ databaseId: id, limit: 100, minSeverity: "", q: "", cursor: tail.nextCursor });
    expect(next.entries.some((e) => e.sqlState === "42P01")).toBe(true);
  });

  it("never shows a password: ALTER ROLE … PASSWORD that succeeds is not logged, one that fails is masked", async () => {
    const c = await connect(inst.port, inst.password);
    try {
      await c.query("CREATE ROLE bi_reader LOGIN PASSWORD 'Plain-Secret-One'");
      await c.query("ALTER ROLE bi_reader PASSWORD 'Plain-Secret-Two'");
      await c.query("ALTER ROLE no_such_role PASSWORD 'Plain-Secret-Three'").catch(() => {});
      await c.query("ALTER ROLE bi_reader WITH PASSWORD Plain_Secret_Four").catch(() => {});
    } finally {
      await c.end();
    }
    const r = await waitFor(async () => {
      const p = await admin.readLogs({ databaseId: id, limit: 1000, minSeverity: "", q: "", cursor: "" });
      return p.entries.some((e) => e.sqlState === "42601") && p;
    }, 60_000);
    const text = JSON.stringify(r.entries.map((e) => [e.message, e.detail, e.hint, e.statement, e.context]));
    expect(text).toContain("ALTER ROLE no_such_role PASSWORD '[redacted]'");
    for (const s of ["Plain-Secret-One", "Plain-Secret-Two", "Plain-Secret-Three", "Plain_Secret_Four"]) expect(text).not.toContain(s);
    // The files themselves hold no successful statement's password (nothing logs statements).
    const dir = path.join(host.dataDir, "server-logs", id);
    let raw = "";
    for (const f of await readdir(dir)) raw += await readFile(path.join(dir, f), "utf8");
    expect(raw).not.toContain("Plain-Secret-One");
    expect(raw).not.toContain("Plain-Secret-Two");
  });

  it("refuses a cursor it never gave and a severity that is none", async () => {
    expect(await codeOf(admin.readLogs({ databaseId: id, limit: 10, minSeverity: "", q: "", cursor: "bm9wZQ" }))).toBe("InvalidArgument");
    expect(await codeOf(admin.readLogs({ databaseId: id, limit: 10, minSeverity: "LOUD", q: "", cursor: "" }))).toBe("InvalidArgument");
    expect(await codeOf(admin.readLogs({ databaseId: "nothere", limit: 10, minSeverity: "", q: "", cursor: "" }))).toBe("NotFound");
  });

  it("lists the customer's statements, normalized, ordered by calls, and resets them", async () => {
    const c = await connect(inst.port, inst.password);
    try {
      await c.query("CREATE TABLE IF NOT EXISTS hits (n int)");
      for (let i = 0; i < 25; i++) await c.query(`SELECT count(*) FROM hits WHERE n > ${i}`);
    } finally {
      await c.end();
    }
    const { stats } = await admin.listQueryStats({ databaseId: id, orderBy: "calls", limit: 5 });
    expect(stats[0]).toMatchObject({ query: "SELECT count(*) FROM hits WHERE n > $1", user: "dbadmin", database: "defaultdb" });
    expect(stats[0]!.calls).toBeGreaterThanOrEqual(25n);
    // Each order is numeric, highest first (calls as text sorted 9 above 25; the mean was an SQL error).
    for (const orderBy of ["calls", "total_time", "mean_time"] as const) {
      const listed = (await admin.listQueryStats({ databaseId: id, orderBy, limit: 100 })).stats;
      const key = (x: (typeof listed)[number]) =>
        orderBy === "calls" ? Number(x.calls) : orderBy === "total_time" ? x.totalTimeMs : x.meanTimeMs;
      expect(listed.length, orderBy).toBeGreaterThan(1);
      expect(listed.map(key), orderBy).toEqual(listed.map(key).sort((a, b) => b - a));
    }
    expect(stats.every((s) => s.user !== "dbaas_agent")).toBe(true);
    // Utility statements (which pg_stat_statements does not normalize: a password would stay) are not kept.
    const all = await admin.listQueryStats({ databaseId: id, orderBy: "total_time", limit: 100 });
    expect(JSON.stringify(all.stats, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain("Plain-Secret");
    expect(await codeOf(admin.listQueryStats({ databaseId: id, orderBy: "rows", limit: 5 }))).toBe("InvalidArgument");

    await admin.resetQueryStats({ databaseId: id });
    const after = await admin.listQueryStats({ databaseId: id, orderBy: "calls", limit: 100 });
    expect(after.stats.find((s) => s.query.includes("FROM hits"))).toBeUndefined();
    expect(after.statsReset).toBeDefined();
  });
});
