import { createHmac, randomBytes } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import {
  checkPaging,
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
  MAX_LIFETIME_S,
  requireSecret,
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
  it("refuses a credential valid for more than 5 minutes, even correctly signed", () => {
    // What a holder of the secret (or a signer with a far-off clock) could mint: the lifetime is the verifier's to enforce.
    const signed = (expS: number) => {
      const payload = `v1.gateway.${expS}`;
      return `${payload}.${createHmac("sha256", "s3cret").update(payload).digest("base64url")}`;
    };
    const now = Date.now();
    const nowS = Math.floor(now / 1000);
    expect(verifyInternalToken("s3cret", signed(nowS + MAX_LIFETIME_S - 5), now)).toBe("gateway");
    expect(verifyInternalToken("s3cret", signed(nowS + MAX_LIFETIME_S + 5), now)).toBeUndefined();
    expect(verifyInternalToken("s3cret", signed(nowS + 365 * 86_400), now)).toBeUndefined();
    expect(MAX_LIFETIME_S).toBeLessThanOrEqual(300);
    // What this kit mints is within it.
    expect(verifyInternalToken("s3cret", mintInternalToken("s3cret", "gateway", now), now + 1000)).toBe("gateway");
  });
});

describe("production secrets", () => {
  const prod = (value: string) => ({ NODE_ENV: "production", INTERNAL_AUTH_SECRET: value });
  it("refuses a short or example secret with NODE_ENV=production, naming the variable and not the value", () => {
    expect(() => requireSecret(prod("x".repeat(31)), "INTERNAL_AUTH_SECRET")).toThrow(/INTERNAL_AUTH_SECRET is shorter than 32 bytes/);
    expect(() => requireSecret(prod("dev-only-internal-auth-secret-do-not-deploy"), "INTERNAL_AUTH_SECRET")).toThrow(
      /INTERNAL_AUTH_SECRET is an example value/,
    );
    try {
      requireSecret(prod("short-secret"), "INTERNAL_AUTH_SECRET");
    } catch (err) {
      expect((err as Error).message).not.toContain("short-secret");
    }
    const good = randomBytes(32).toString("base64url");
    expect(requireSecret(prod(good), "INTERNAL_AUTH_SECRET")).toBe(good);
  });
  it("takes any non-empty secret outside production, and none when missing", () => {
    expect(requireSecret({ INTERNAL_AUTH_SECRET: "s" }, "INTERNAL_AUTH_SECRET")).toBe("s");
    expect(() => requireSecret({ NODE_ENV: "production" }, "INTERNAL_AUTH_SECRET")).toThrow(/missing required environment variable/);
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

describe("paging", () => {
  const page = (p: number, pp: number) => {
    const v = new Validator();
    return { ...checkPaging(v, p, pp), violations: v.violations };
  };
  it("defaults proto3's zeros and checks the bounds per field", () => {
    expect(page(0, 0)).toEqual({ page: 1, perPage: 20, violations: [] });
    expect(page(3, 100)).toEqual({ page: 3, perPage: 100, violations: [] });
    expect(page(-2, 101).violations).toEqual([
      { field: "page", message: "must be at least 1" },
      { field: "per_page", message: "must be between 1 and 100" },
    ]);
    expect(page(1_000_000_000, 1).violations).toEqual([{ field: "page", message: "must be at most 999999999" }]);
  });
});
