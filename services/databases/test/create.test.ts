import { randomBytes } from "node:crypto";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { DesiredState } from "@dbaas/proto/agent";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { verifiesScram } from "@dbaas/kit";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";
import {
  DOMAIN,
  createDb,
  createHarness,
  expectCode,
  registerAgent,
  resetTables,
  snapshot,
  uniqueName,
  violationsOf,
  type Harness,
} from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

// Placement depends on every agent in the table, so each test starts from none.
beforeEach(async () => {
  await resetTables(h);
});

const ORG = "org-create";

describe("CreateDatabase validation", () => {
  beforeEach(async () => {
    await registerAgent(h, "val-a", { versions: ["17", "16"] });
  });

  it("reports one violation per invalid field, naming the allowed values", async () => {
    const err = await expectCode(
      h.dbs.createDatabase({ organizationId: ORG, name: "ab", region: "mars", tier: "huge", version: "9" }),
      Code.InvalidArgument,
    );
    expect(violationsOf(err)).toEqual([
      { field: "name", message: "must be 3-63 characters long" },
      { field: "region", message: "must be one of: fsn1, nbg1, hel1" },
      { field: "tier", message: "must be one of: micro, small, medium, large, xlarge" },
      { field: "version", message: "must be one of: 17, 16" },
    ]);
    const { rows } = await h.ctx.pool.query("SELECT (SELECT count(*) FROM databases) + (SELECT count(*) FROM outbox) AS n");
    expect(Number(rows[0].n)).toBe(0);
  });

  it("requires name, region, tier and organization", async () => {
    const err = await expectCode(h.dbs.createDatabase({ organizationId: "", name: "   ", region: "", tier: "" }), Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      { field: "name", message: "is required" },
      { field: "region", message: "is required" },
      { field: "tier", message: "is required" },
      { field: "organization_id", message: "is required" },
    ]);
  });

  it.each([
    ["too short after trimming", "  ab  ", "must be 3-63 characters long"],
    ["too long", "x".repeat(64), "must be 3-63 characters long"],
    ["a control character", "bad\u0007name", "must not contain control characters"],
    ["a newline inside", "bad\nname", "must not contain control characters"],
    ["a NUL", "bad\u0000name", "must not contain control characters"],
    ["a carriage return inside", "bad\rname", "must not contain control characters"],
    ["a right-to-left override (U+202E)", "invoice\u202Egpj.exe", "must not contain control characters"],
    ["a bidi isolate (U+2066)", "a\u2066bc\u2069d", "must not contain control characters"],
    ["a zero-width space (U+200B)", "orders\u200B", "must not contain control characters"],
    ["a zero-width joiner (U+200D)", "ord\u200Ders", "must not contain control characters"],
    ["a byte order mark inside (U+FEFF)", "ord\uFEFFers", "must not contain control characters"],
    ["a line separator (U+2028)", "bad\u2028name", "must not contain control characters"],
    ["a lone surrogate", "bad\uD800name", "must not contain control characters"],
    ["64 characters beyond the BMP", "\u{1F418}".repeat(64), "must be 3-63 characters long"],
  ])("refuses a name with %s", async (_what, name, message) => {
    const err = await expectCode(h.dbs.createDatabase({ organizationId: ORG, name, region: "fsn1", tier: "micro" }), Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([{ field: "name", message }]);
  });

  it("bounds the organization id it stores and indexes (an internal caller's junk is no 500)", async () => {
    const err = await expectCode(
      // Random, so PostgreSQL cannot compress it below the index row limit (it failed with "index row size … exceeds").
      h.dbs.createDatabase({ organizationId: randomBytes(4000).toString("base64"), name: "orders", region: "fsn1", tier: "micro" }),
      Code.InvalidArgument,
    );
    expect(violationsOf(err)).toEqual([{ field: "organization_id", message: "must be at most 128 characters" }]);
  });

  it("accepts names of 3 and 63 characters and stores them trimmed", async () => {
    const short = await createDb(h, ORG, { name: "  abc\t" });
    expect(short.database!.name).toBe("abc");
    const long = await createDb(h, ORG, { name: "y".repeat(63) });
    expect(long.database!.name).toBe("y".repeat(63));
    // Characters, not UTF-16 units: 63 elephants are 126 units.
    const elephants = await createDb(h, ORG, { name: "\u{1F418}".repeat(63) });
    expect(elephants.database!.name).toBe("\u{1F418}".repeat(63));
    const accented = await createDb(h, ORG, { name: "Bestellungen für Zürich" });
    expect(accented.database!.name).toBe("Bestellungen für Zürich");
  });

  it("holds a rename to the same rules", async () => {
    const { database } = await createDb(h, ORG);
    for (const name of ["x\u202Ey", "two\nlines", "zero\u200Bwidth", "z".repeat(64)]) {
      const err = await expectCode(h.dbs.updateDatabase({ organizationId: ORG, id: database!.id, name }), Code.InvalidArgument);
      expect(violationsOf(err).map((v) => v.field)).toEqual(["name"]);
    }
    expect((await h.dbs.getDatabase({ organizationId: ORG, id: database!.id })).database!.name).toBe(database!.name);
  });

  it("refuses a live duplicate name, case-insensitively, but not across organizations", async () => {
    await createDb(h, ORG, { name: "Orders" });
    const err = await expectCode(createDb(h, ORG, { name: " orders " }), Code.AlreadyExists);
    expect(err.rawMessage).toContain('"orders" already exists');
    await createDb(h, "org-other", { name: "ORDERS" });
    const { rows } = await h.ctx.pool.query("SELECT count(*)::int AS n FROM databases WHERE lower(name) = 'orders'");
    expect(rows[0].n).toBe(2);
  });
});

describe("CreateDatabase result", () => {
  it("returns the record, a fresh password and a connection string carrying it", async () => {
    await registerAgent(h, "res-a", { ports: [31000, 31010] });
    const before = Date.now();
    const res = await createDb(h, ORG, { name: "billing-db", tier: "small" });
    const db = res.database!;
    expect(db.id).toMatch(/^db-[a-z0-9]+$/);
    expect(db).toMatchObject({
      organizationId: ORG,
      name: "billing-db",
      region: "fsn1",
      tier: "small",
      version: "17",
      status: "provisioning",
      host: `${db.id}.${DOMAIN}`,
      port: 31000,
      database: "defaultdb",
      username: "dbadmin",
      statusReason: "",
    });
    expect(timestampDate(db.createdAt!).getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(res.password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(res.connectionString).toBe(`postgresql://dbadmin:${res.password}@${db.id}.${DOMAIN}:31000/defaultdb?sslmode=require`);
    // The record itself only ever shows the masked form.
    expect(db.connectionString).toBe(`postgresql://dbadmin:********@${db.id}.${DOMAIN}:31000/defaultdb?sslmode=require`);

    const got = (await h.dbs.getDatabase({ organizationId: ORG, id: db.id })).database!;
    expect(got.connectionString).toBe(db.connectionString);
    expect(got.connectionString).not.toContain(res.password);

    const ops = await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id });
    expect(ops.operations.map((o) => [o.type, o.status])).toEqual([["create", "running"]]);

    // The agent is told to run it, with the verifier and never the password.
    const spec = (await snapshot(h, "res-a")).instances.find((i) => i.databaseId === db.id)!;
    expect(spec).toMatchObject({ desiredState: DesiredState.RUNNING, tier: "small", version: "17", port: 31000, host: db.host });
    // One PBKDF2 iteration for a generated password (scram.ts: its ~186 random bits need none of PBKDF2's help).
    expect(spec.scramVerifier).toMatch(/^SCRAM-SHA-256\$1:/);
    expect(verifiesScram(spec.scramVerifier, res.password)).toBe(true);
    expect(spec.scramVerifier).not.toContain(res.password);
  });

  it("draws verifiers with GENERATED_PASSWORD_SCRAM_ITERATIONS, refusing a count outside 1 … 100000", async () => {
    await registerAgent(h, "iter-a");
    const res = await h
      .dbsWith({ scramIterations: 4096 })
      .createDatabase({ organizationId: ORG, name: uniqueName(), region: "fsn1", tier: "micro", version: "" });
    const spec = (await snapshot(h, "iter-a")).instances.find((i) => i.databaseId === res.database!.id)!;
    expect(spec.scramVerifier).toMatch(/^SCRAM-SHA-256\$4096:/);
    expect(verifiesScram(spec.scramVerifier, res.password)).toBe(true);

    const env = { DATABASE_URL: "postgres://x", INTERNAL_AUTH_SECRET: "s".repeat(32), BILLING_URL: "http://x", IDENTITY_URL: "http://x" };
    expect(readConfig(env).scramIterations).toBe(1);
    expect(readConfig({ ...env, GENERATED_PASSWORD_SCRAM_ITERATIONS: "4096" }).scramIterations).toBe(4096);
    for (const bad of ["0", "-1", "100001", "1.5", "many"]) {
      expect(() => readConfig({ ...env, GENERATED_PASSWORD_SCRAM_ITERATIONS: bad })).toThrow(/GENERATED_PASSWORD_SCRAM_ITERATIONS/);
    }
  });

  it("gives every database its own password", async () => {
    await registerAgent(h, "pw-a");
    const a = await createDb(h, ORG);
    const b = await createDb(h, ORG);
    expect(a.password).not.toBe(b.password);
  });

  it("stores a SCRAM verifier and never the password, nor logs it", async () => {
    await registerAgent(h, "store-a");
    const res = await createDb(h, ORG);
    const { rows } = await h.ctx.pool.query<{ row: string; verifier: string }>(
      "SELECT row_to_json(d)::text AS row, scram_verifier AS verifier FROM databases d WHERE id = $1",
      [res.database!.id],
    );
    expect(rows[0]!.verifier).toMatch(/^SCRAM-SHA-256\$1:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(rows[0]!.row).not.toContain(res.password);
    const everything = await h.ctx.pool.query<{ t: string }>(
      `SELECT coalesce(string_agg(t, ' '), '') AS t FROM (
         SELECT row_to_json(o)::text AS t FROM operations o UNION ALL SELECT row_to_json(x)::text FROM outbox x) s`,
    );
    expect(everything.rows[0]!.t).not.toContain(res.password);
    // The create was logged; neither the password nor the verifier was.
    expect(h.logs.some((l) => l.includes(res.database!.id))).toBe(true);
    expect(h.logs.join("\n")).not.toContain(res.password);
    expect(h.logs.join("\n")).not.toContain(rows[0]!.verifier);
  });
});

describe("placement", () => {
  it("picks the live agent of the region with the most free capacity, the lowest id on a tie", async () => {
    await registerAgent(h, "pl-a", { regions: ["fsn1"], capacity: 3 });
    await registerAgent(h, "pl-b", { regions: ["fsn1", "nbg1"], capacity: 5 });
    await registerAgent(h, "pl-c", { regions: ["nbg1"], capacity: 50 });
    const placed: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { database } = await createDb(h, ORG);
      const { rows } = await h.ctx.pool.query("SELECT agent_id FROM databases WHERE id = $1", [database!.id]);
      placed.push(rows[0].agent_id);
    }
    // Free 3/5 → b; 3/4 → b; 3/3 → a (id order); 2/3 → b.
    expect(placed).toEqual(["pl-b", "pl-b", "pl-a", "pl-b"]);
  });

  it("ignores agents not heard from within the timeout", async () => {
    await registerAgent(h, "stale-big", { capacity: 100 });
    await registerAgent(h, "fresh-small", { capacity: 2 });
    await h.ctx.pool.query("UPDATE agents SET last_seen_at = now() - interval '31 seconds' WHERE id = 'stale-big'");
    const { database } = await createDb(h, ORG);
    const { rows } = await h.ctx.pool.query("SELECT agent_id FROM databases WHERE id = $1", [database!.id]);
    expect(rows[0].agent_id).toBe("fresh-small");
  });

  it("takes the lowest free port; a deleted database keeps its port until purged", async () => {
    await registerAgent(h, "ports-a", { ports: [40000, 40009] });
    const ports: number[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { database } = await createDb(h, ORG);
      ports.push(database!.port);
      ids.push(database!.id);
    }
    expect(ports).toEqual([40000, 40001, 40002]);

    await h.dbs.deleteDatabase({ organizationId: ORG, id: ids[1]! });
    expect((await createDb(h, ORG)).database!.port).toBe(40003);

    await h.ctx.pool.query("UPDATE databases SET desired_state = 'purged' WHERE id = $1", [ids[1]]);
    expect((await createDb(h, ORG)).database!.port).toBe(40001);
  });

  it("moves on to the next agent when one has capacity but no free port", async () => {
    await registerAgent(h, "narrow", { capacity: 10, ports: [41000, 41000] });
    await registerAgent(h, "wide", { capacity: 5, ports: [42000, 42010] });
    expect((await createDb(h, ORG)).database!.port).toBe(41000);
    expect((await createDb(h, ORG)).database!.port).toBe(42000);
  });

  // RESOURCE_EXHAUSTED with reason service_unavailable (the API's 503 with this message), never UNAVAILABLE:
  // that code would make the internal client send the create again.
  it("answers RESOURCE_EXHAUSTED naming region and version when no live agent serves the region", async () => {
    await registerAgent(h, "elsewhere", { regions: ["nbg1"] });
    const err = await expectCode(createDb(h, ORG, { region: "hel1" }), Code.ResourceExhausted);
    expect(err.rawMessage).toMatch(/PostgreSQL 17 in region hel1/);
    expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["service_unavailable"]);

    await h.ctx.pool.query("UPDATE agents SET last_seen_at = now() - interval '1 hour'");
    const stale = await expectCode(createDb(h, ORG, { region: "nbg1" }), Code.ResourceExhausted);
    expect(stale.rawMessage).toMatch(/region nbg1/);
  });

  it("answers RESOURCE_EXHAUSTED when the region's agents are full, writing nothing", async () => {
    await registerAgent(h, "full", { capacity: 1 });
    await createDb(h, ORG);
    const counts = async () =>
      (
        await h.ctx.pool.query(
          "SELECT (SELECT count(*) FROM databases)::int AS d, (SELECT count(*) FROM operations)::int AS o, (SELECT count(*) FROM outbox)::int AS e",
        )
      ).rows[0];
    const before = await counts();
    const err = await expectCode(createDb(h, ORG), Code.ResourceExhausted);
    expect(err.rawMessage).toContain("no capacity");
    expect(await counts()).toEqual(before);
  });

  it("answers RESOURCE_EXHAUSTED when the version exists only on another region's agents", async () => {
    await registerAgent(h, "fsn-17", { regions: ["fsn1"], versions: ["17"] });
    await registerAgent(h, "nbg-16", { regions: ["nbg1"], versions: ["16", "17"] });
    const err = await expectCode(createDb(h, ORG, { region: "fsn1", version: "16" }), Code.ResourceExhausted);
    expect(err.rawMessage).toMatch(/PostgreSQL 16 in region fsn1/);
    expect((await createDb(h, ORG, { region: "nbg1", version: "16" })).database!.version).toBe("16");
  });

  it("never exceeds capacity nor shares a port under concurrent creates", async () => {
    await registerAgent(h, "busy", { capacity: 5, ports: [43000, 43099] });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => createDb(h, ORG, { name: uniqueName("race") })));
    const ok = results.filter((r) => r.status === "fulfilled");
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(failed.map((r) => Code[(r.reason as { code: Code }).code])).toEqual(Array(failed.length).fill("ResourceExhausted"));
    const { rows } = await h.ctx.pool.query<{ port: number }>("SELECT port FROM databases WHERE agent_id = 'busy'");
    expect(rows.length).toBeLessThanOrEqual(5);
    expect(new Set(rows.map((r) => r.port)).size).toBe(rows.length);
    expect(ok.length).toBe(rows.length);
    expect(ok.length).toBe(5);
  });

  it("lets exactly one of several concurrent creates with the same name win", async () => {
    await registerAgent(h, "same-name", { capacity: 20 });
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => createDb(h, ORG, { name: "twin" })));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results) {
      if (r.status === "rejected") expect(Code[(r.reason as { code: Code }).code]).toBe("AlreadyExists");
    }
  });
});

describe("catalogue", () => {
  it("lists the regions", async () => {
    const { regions } = await h.dbs.listRegions({});
    expect(regions.map((r) => r.code)).toEqual(["fsn1", "nbg1", "hel1"]);
    expect(regions.every((r) => r.name.length > 0)).toBe(true);
  });

  it("lists the tiers with their resources and hourly prices", async () => {
    const { tiers } = await h.dbs.listTiers({});
    expect(tiers.map((t) => [t.name, t.vcpu, t.memoryGb, t.storageGb, t.hourlyPrice])).toEqual([
      ["micro", 1, 1, 10, 0.02],
      ["small", 2, 4, 40, 0.06],
      ["medium", 4, 8, 100, 0.12],
      ["large", 8, 16, 250, 0.24],
      ["xlarge", 16, 32, 500, 0.48],
    ]);
  });

  it("lists the versions the registered agents have, flagging the default", async () => {
    expect((await h.dbs.listVersions({})).versions).toEqual([]);
    await registerAgent(h, "v-a", { versions: ["17", "16"] });
    await registerAgent(h, "v-b", { regions: ["hel1"], versions: ["16", "15"] });
    const { versions } = await h.dbs.listVersions({});
    expect(versions.map((v) => [v.version, v.isDefault])).toEqual([
      ["17", true],
      ["16", false],
      ["15", false],
    ]);
  });
});

describe("RegisterAgent", () => {
  it("validates its input, one violation per field", async () => {
    const err = await expectCode(
      h.agents.registerAgent({
        agentId: "Not A Label",
        regions: [],
        capacity: -1,
        portRangeStart: 80,
        portRangeEnd: 90,
        versions: [],
        caCertificatePem: "nope",
      }),
      Code.InvalidArgument,
    );
    expect(violationsOf(err).map((v) => v.field)).toEqual([
      "agent_id",
      "regions",
      "capacity",
      "port_range_start",
      "versions",
      "ca_certificate_pem",
    ]);
  });

  it("updates an agent registering again, and serves its CA to the databases it hosts", async () => {
    await registerAgent(h, "re-reg", { capacity: 1 });
    await registerAgent(h, "re-reg", { capacity: 2 });
    await createDb(h, ORG);
    const { database } = await createDb(h, ORG);
    const { pem } = await h.dbs.getCaCertificate({ organizationId: ORG, id: database!.id });
    expect(pem).toContain("BEGIN CERTIFICATE");
  });
});
