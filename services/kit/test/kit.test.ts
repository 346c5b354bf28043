import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import {
  ConfigError,
  Validator,
  createPool,
  envInt,
  envList,
  migrate,
  mintInternalToken,
  newId,
  randomToken,
  requireEnv,
  verifyInternalToken,
  withTransaction,
} from "../src/index.ts";

describe("internal credentials", () => {
  it("verifies a fresh token and names the caller", () => {
    expect(verifyInternalToken("s3cret", mintInternalToken("s3cret", "gateway"))).toBe("gateway");
  });
  it("refuses another secret, a tampered caller, an expired token and garbage", () => {
    const token = mintInternalToken("s3cret", "gateway");
    expect(verifyInternalToken("other", token)).toBeUndefined();
    expect(verifyInternalToken("s3cret", token.replace("gateway", "support"))).toBeUndefined();
    const old = mintInternalToken("s3cret", "gateway", Date.now() - 120_000);
    expect(verifyInternalToken("s3cret", old)).toBeUndefined();
    for (const bad of [null, "", "v1", "v2.a.1.b", "v1.a.b.c.d"]) expect(verifyInternalToken("s3cret", bad)).toBeUndefined();
  });
});

describe("config", () => {
  it("fails fast naming the variable", () => {
    expect(() => requireEnv({}, "DATABASE_URL")).toThrow(new ConfigError("missing required environment variable DATABASE_URL"));
    expect(() => envInt({ PORT: "80a" }, "PORT", 1)).toThrow(/PORT must be an integer/);
    expect(envInt({}, "PORT", 8080)).toBe(8080);
    expect(envList({ R: " a, b ,," }, "R", [])).toEqual(["a", "b"]);
  });
});

describe("ids", () => {
  it("are prefixed, DNS-safe and spread over the whole alphabet", () => {
    expect(newId("db")).toMatch(/^db-[a-z0-9]{16}$/);
    const counts = new Map<string, number>();
    for (const c of randomToken(36_000)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(36);
    for (const n of counts.values()) expect(n).toBeGreaterThan(800);
  });
});

describe("Validator", () => {
  it("collects every violation into one INVALID_ARGUMENT with details", () => {
    const v = new Validator();
    v.oneOf("region", "", ["fsn1"]);
    v.oneOf("tier", "huge", ["micro", "small"]);
    try {
      v.throwIfAny();
      expect.unreachable();
    } catch (err) {
      const ce = ConnectError.from(err);
      expect(ce.code).toBe(Code.InvalidArgument);
      expect(ce.findDetails(FieldViolationSchema).map((d) => [d.field, d.message])).toEqual([
        ["region", "is required"],
        ["tier", "must be one of: micro, small"],
      ]);
    }
  });
});

describe("migrate", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase("kit");
  });
  afterAll(async () => db?.drop());

  it("applies each file once, in order, in the service's schema; a failing file changes nothing", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kit-migrations-"));
    await writeFile(join(dir, "0001_a.sql"), "CREATE TABLE things (id int PRIMARY KEY);");
    await writeFile(join(dir, "0002_b.sql"), "INSERT INTO things VALUES (1);");
    const pool = createPool(db.url, "svc_a");
    try {
      const [first, second] = await Promise.all([migrate(pool, "svc_a", dir), migrate(pool, "svc_a", dir)]);
      expect([...first, ...second].sort()).toEqual(["0001_a.sql", "0002_b.sql"]);
      expect((await pool.query("SELECT count(*)::int AS n FROM things")).rows[0].n).toBe(1);
      const where = await pool.query("SELECT table_schema FROM information_schema.tables WHERE table_name = 'things'");
      expect(where.rows).toEqual([{ table_schema: "svc_a" }]);

      await writeFile(join(dir, "0003_bad.sql"), "INSERT INTO things VALUES (2); SELECT broken syntax here;");
      await expect(migrate(pool, "svc_a", dir)).rejects.toThrow(/0003_bad.sql failed/);
      expect((await pool.query("SELECT count(*)::int AS n FROM things")).rows[0].n).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it("survives the connection of a transaction dying mid-way: that call fails, the process and the pool go on", async () => {
    const pool = createPool(db.url, "svc_tx");
    const admin = createPool(db.url, "svc_tx");
    try {
      const err = await withTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        await admin.query("SELECT pg_terminate_backend($1)", [rows[0]!.pid]);
        // What a slow call to another service looks like: the connection dies while nothing is asked of it.
        await new Promise((r) => setTimeout(r, 200));
        await client.query("SELECT 1");
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      // The dead client was not handed back: the next transaction gets a working connection.
      expect(await withTransaction(pool, async (client) => (await client.query("SELECT 41 + 1 AS n")).rows[0].n)).toBe(42);
    } finally {
      await pool.end();
      await admin.end();
    }
  });

  it("refuses a schema name that is not a plain identifier", () => {
    expect(() => createPool(db.url, "x; DROP TABLE y")).toThrow(/invalid schema name/);
  });
});
