import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepExpiredTrustedSources } from "../src/background.ts";
import { parseCidr } from "../src/cidr.ts";
import { CA_PEM, createHarness, expectCode, runningDb, specOf, violationsOf, type Harness } from "./harness.ts";

// Trusted sources and the pooler on the databases service's side (docs/product.md, Trusted sources and
// connection pooling): normalization and its 422s, the limit, expiry, the specs the agents get (a
// replica's carries its primary's list), and the pooler's settings bounded by the tier.

let h: Harness;
const AGENT = "edge-a";
const BARE_AGENT = "edge-bare";
const ORG = "org-edge";
const OFFSET = 1000;

beforeAll(async () => {
  h = await createHarness({ BACKUP_MAX_RUNNING_PER_AGENT: "0" });
  await h.agents.registerAgent({
    agentId: AGENT,
    regions: ["fsn1"],
    capacity: 100,
    portRangeStart: 21000,
    portRangeEnd: 21099,
    versions: ["17"],
    caCertificatePem: CA_PEM,
    publicAddresses: ["127.0.0.1"],
    poolerPortOffset: OFFSET,
  });
  await h.agents.registerAgent({
    agentId: BARE_AGENT,
    regions: ["hel1"],
    capacity: 10,
    portRangeStart: 22000,
    portRangeEnd: 22099,
    versions: ["17"],
    caCertificatePem: CA_PEM,
    publicAddresses: ["127.0.0.1"],
    poolerUnavailableReason: "pgbouncer is not installed",
  });
});

afterAll(async () => {
  await h?.close();
});

const add = (databaseId: string, cidr: string, o: { description?: string; expiresAt?: Date; org?: string } = {}) =>
  h.dbs.createTrustedSource({
    organizationId: o.org ?? ORG,
    databaseId,
    cidr,
    description: o.description ?? "",
    expiresAt: o.expiresAt ? timestampFromDate(o.expiresAt) : undefined,
  });
const list = async (databaseId: string) =>
  (await h.dbs.listTrustedSources({ organizationId: ORG, databaseId, perPage: 100 })).trustedSources.map((t) => t.cidr);

describe("CIDR normalization", () => {
  it("takes addresses and networks of both families in network form", () => {
    expect(parseCidr("10.0.0.0/8")).toEqual({ ok: true, cidr: "10.0.0.0/8", family: 4 });
    expect(parseCidr(" 198.51.100.7 ")).toEqual({ ok: true, cidr: "198.51.100.7/32", family: 4 });
    expect(parseCidr("2001:DB8:0:0::/32")).toEqual({ ok: true, cidr: "2001:db8::/32", family: 6 });
    expect(parseCidr("::1")).toEqual({ ok: true, cidr: "::1/128", family: 6 });
    expect(parseCidr("2001:db8:0:0:1:0:0:1/128")).toEqual({ ok: true, cidr: "2001:db8::1:0:0:1/128", family: 6 });
    expect(parseCidr("0.0.0.0/0")).toEqual({ ok: true, cidr: "0.0.0.0/0", family: 4 });
  });

  it("names the network meant when host bits are set, and refuses what is no address", () => {
    const r = parseCidr("10.1.2.3/8");
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toContain("did you mean 10.0.0.0/8");
    expect(!r.ok && r.message).toContain("10.1.2.3/32");
    const v6 = parseCidr("2001:db8::1/32");
    expect(!v6.ok && v6.message).toContain("did you mean 2001:db8::/32");
    for (const bad of ["10.0.0.0/33", "::/129", "10.0.0/8", "example.com", "10.0.0.0/08", "10.0.0.0/", "fe80::1%eth0", "1.2.3.4/-1"]) {
      expect(parseCidr(bad).ok, bad).toBe(false);
    }
  });
});

describe("trusted sources", () => {
  it("adds, lists oldest first and removes; the spec carries the list", async () => {
    const db = (await runningDb(h, ORG, AGENT)).database!;
    expect((await specOf(h, AGENT, db.id))!.trustedSources).toEqual([]);
    const a = (await add(db.id, "203.0.113.0/24", { description: "office" })).trustedSource!;
    expect(a.id).toMatch(/^ts-/);
    expect(a.cidr).toBe("203.0.113.0/24");
    expect(a.description).toBe("office");
    expect(a.expiresAt).toBeUndefined();
    await add(db.id, "2001:db8::/32");
    expect(await list(db.id)).toEqual(["203.0.113.0/24", "2001:db8::/32"]);
    const spec = await specOf(h, AGENT, db.id);
    expect(spec!.trustedSources.map((t) => t.cidr)).toEqual(["203.0.113.0/24", "2001:db8::/32"]);
    await h.dbs.deleteTrustedSource({ organizationId: ORG, databaseId: db.id, trustedSourceId: a.id });
    expect(await list(db.id)).toEqual(["2001:db8::/32"]);
    await expectCode(h.dbs.deleteTrustedSource({ organizationId: ORG, databaseId: db.id, trustedSourceId: a.id }), Code.NotFound);
  });

  it("refuses bad input with a 422 naming the field, duplicates and another organization's database", async () => {
    const db = (await runningDb(h, ORG, AGENT)).database!;
    const e = await expectCode(add(db.id, "10.1.2.3/8"), Code.InvalidArgument);
    expect(violationsOf(e)[0]!.field).toBe("cidr");
    expect(violationsOf(e)[0]!.message).toContain("did you mean 10.0.0.0/8");
    const past = await expectCode(add(db.id, "10.0.0.0/8", { expiresAt: new Date(Date.now() - 1000) }), Code.InvalidArgument);
    expect(violationsOf(past).map((v) => v.field)).toEqual(["expires_at"]);
    const long = await expectCode(add(db.id, "10.0.0.0/8", { description: "x".repeat(256) }), Code.InvalidArgument);
    expect(violationsOf(long).map((v) => v.field)).toEqual(["description"]);
    await add(db.id, "10.0.0.0/8");
    await expectCode(add(db.id, "10.0.0.0/8"), Code.AlreadyExists);
    await expectCode(add(db.id, "10.0.0.0/8", { org: "org-other" }), Code.NotFound);
    await expectCode(h.dbs.listTrustedSources({ organizationId: "org-other", databaseId: db.id }), Code.NotFound);
  });

  it("holds at most 50 per database", async () => {
    const db = (await runningDb(h, ORG, AGENT)).database!;
    for (let i = 0; i < 50; i++) await add(db.id, `10.0.${i}.0/24`);
    const e = await expectCode(add(db.id, "10.1.0.0/24"), Code.FailedPrecondition);
    expect(e.rawMessage).toContain("50");
    const all = await h.dbs.listTrustedSources({ organizationId: ORG, databaseId: db.id, perPage: 20, page: 3 });
    expect(all.total).toBe(50);
    expect(all.trustedSources).toHaveLength(10);
  });

  it("an expired entry leaves the list and the spec; the sweep deletes it", async () => {
    const db = (await runningDb(h, ORG, AGENT)).database!;
    const soon = new Date(Date.now() + 1500);
    const t = (await add(db.id, "192.0.2.1", { expiresAt: soon })).trustedSource!;
    expect(timestampDate(t.expiresAt!).getTime()).toBe(soon.getTime());
    expect(
      (await specOf(h, AGENT, db.id))!.trustedSources.map((s) => [s.cidr, s.expiresAt && timestampDate(s.expiresAt).getTime()]),
    ).toEqual([["192.0.2.1/32", soon.getTime()]]);
    await new Promise((r) => setTimeout(r, 1600));
    expect(await list(db.id)).toEqual([]);
    expect((await specOf(h, AGENT, db.id))!.trustedSources).toEqual([]);
    expect(await sweepExpiredTrustedSources(h.ctx)).toBeGreaterThan(0);
    const { rows } = await h.ctx.pool.query("SELECT 1 FROM trusted_sources WHERE database_id = $1", [db.id]);
    expect(rows).toHaveLength(0);
  });
});

describe("pooler", () => {
  it("is on by default in transaction mode with the tier's pool size, on its own host and port", async () => {
    const db = (await runningDb(h, ORG, AGENT, { tier: "small" })).database!;
    const p = (await h.dbs.getPooler({ organizationId: ORG, databaseId: db.id })).pooler!;
    expect(p).toMatchObject({
      enabled: true,
      mode: "transaction",
      poolSize: 40,
      maxClientConnections: 1000,
      host: `${db.id}-pooler.db.test`,
      port: db.port + OFFSET,
      reason: "",
    });
    expect(p.connectionString).toBe(`postgresql://dbadmin:********@${db.id}-pooler.db.test:${db.port + OFFSET}/defaultdb?sslmode=require`);
    const spec = (await specOf(h, AGENT, db.id))!.pooler!;
    expect(spec).toMatchObject({
      enabled: true,
      mode: "transaction",
      poolSize: 40,
      port: db.port + OFFSET,
      host: `${db.id}-pooler.db.test`,
    });
  });

  it("changes mode, size and enabled within the tier's bounds; 422 naming the field otherwise", async () => {
    const db = (await runningDb(h, ORG, AGENT, { tier: "micro" })).database!;
    const p = (await h.dbs.updatePooler({ organizationId: ORG, databaseId: db.id, mode: "session", poolSize: 45 })).pooler!;
    expect(p).toMatchObject({ mode: "session", poolSize: 45, enabled: true });
    expect((await specOf(h, AGENT, db.id))!.pooler).toMatchObject({ mode: "session", poolSize: 45 });
    const big = await expectCode(h.dbs.updatePooler({ organizationId: ORG, databaseId: db.id, poolSize: 46 }), Code.InvalidArgument);
    expect(violationsOf(big)).toEqual([{ field: "pool_size", message: expect.stringContaining("between 1 and 45") }]);
    const zero = await expectCode(h.dbs.updatePooler({ organizationId: ORG, databaseId: db.id, poolSize: 0 }), Code.InvalidArgument);
    expect(violationsOf(zero).map((v) => v.field)).toEqual(["pool_size"]);
    const mode = await expectCode(h.dbs.updatePooler({ organizationId: ORG, databaseId: db.id, mode: "statement" }), Code.InvalidArgument);
    expect(violationsOf(mode).map((v) => v.field)).toEqual(["mode"]);
    const off = (await h.dbs.updatePooler({ organizationId: ORG, databaseId: db.id, enabled: false })).pooler!;
    expect(off).toMatchObject({ enabled: false, mode: "session", poolSize: 45 });
    expect((await specOf(h, AGENT, db.id))!.pooler!.enabled).toBe(false);
    await expectCode(h.dbs.getPooler({ organizationId: "org-other", databaseId: db.id }), Code.NotFound);
  });

  it("is disabled with the reason on a host without PgBouncer; enabling it there is a 409", async () => {
    const db = (await runningDb(h, ORG, BARE_AGENT, { region: "hel1" })).database!;
    const p = (await h.dbs.getPooler({ organizationId: ORG, databaseId: db.id })).pooler!;
    expect(p.enabled).toBe(false);
    expect(p.reason).toContain("pgbouncer is not installed");
    expect(p.host).toBe("");
    expect((await specOf(h, BARE_AGENT, db.id))!.pooler).toBeUndefined();
    const e = await expectCode(h.dbs.updatePooler({ organizationId: ORG, databaseId: db.id, enabled: true }), Code.FailedPrecondition);
    expect(e.rawMessage).toContain("pgbouncer is not installed");
  });
});
