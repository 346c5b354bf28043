import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService, UsageSampleSchema, type UsageSample } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeEndedPeriods } from "../src/invoices/close.ts";
import { purgeUsageSamples } from "../src/metering/retention.ts";
import { routes } from "../src/routes.ts";
import { createTestContext, type ManualClock, rejection, statusEvent as ev, violationsOf } from "./helpers.ts";

// Month to date: 2025-03-01 .. 2025-03-20T12:00Z; March has 744 hours, February 672.
const NOW = "2025-03-20T12:00:00Z";
const GB = 1_000_000_000n;
// A size held for longer than this past its sample is not billed (a late sample bridges up to it).
const MAX_GAP_MS = 2 * 3_600_000;

let env: Awaited<ReturnType<typeof createTestContext>>;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let orgSeq = 0;
const newOrg = () => `org-meter${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext(NOW, { storageMaxGapMs: MAX_GAP_MS });
  clock = env.clock;
  client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
});

afterAll(async () => {
  await env.close();
});

interface Measured {
  storage?: bigint;
  epoch?: string;
  out?: bigint;
  in?: bigint;
}

/** A sample of the organization's database `db` (database ids are global, so the organization's id is in it). */
function sample(org: string, db: string, sampleId: string, at: string, m: Measured = {}): UsageSample {
  return create(UsageSampleSchema, {
    organizationId: org,
    databaseId: `${org}/${db}`,
    sampleId,
    sampledAt: timestampFromDate(new Date(at)),
    storageBytes: m.storage ?? 0n,
    countersEpoch: m.epoch ?? "e1",
    networkBytesIn: m.in ?? 0n,
    networkBytesOut: m.out ?? 0n,
  });
}

const record = async (...samples: UsageSample[]) => (await client.recordUsageSamples({ samples })).recorded;

async function usage(organizationId: string) {
  const r = await client.getUsage({ organizationId });
  return { storage: r.storageGb, transfer: r.dataTransferGb, total: r.total };
}

describe("storage", () => {
  it("reports the GB stored now and GB-hours accrued × 0.125 / hours in the month, a long gap capped", async () => {
    const org = newOrg();
    await record(
      sample(org, "db-a", "s1", "2025-03-10T00:00:00Z", { storage: 744n * GB }),
      sample(org, "db-a", "s2", "2025-03-10T01:00:00Z", { storage: 744n * GB }),
      sample(org, "db-a", "s3", "2025-03-10T02:00:00Z", { storage: 372n * GB }),
    );
    // 744 GB for 2 h = 1,488 GB-hours = 2 GB-months (744 h) at 0.125.
    expect(await usage(org)).toMatchObject({ storage: { quantity: 372, amount: 0.25 }, total: 0.25 });

    // 5 h later: 372 GB is billed for 2 h (the cap), not 5 — 744 GB-hours more, 1 GB-month.
    await record(sample(org, "db-a", "s4", "2025-03-10T07:00:00Z", { storage: 372n * GB }));
    expect((await usage(org)).storage).toMatchObject({ quantity: 372, amount: 0.375 });
  });

  it("sums the latest sample of every live database; a deleted one stops counting when its samples stop", async () => {
    const org = newOrg();
    await record(
      sample(org, "db-a", "a1", "2025-03-19T00:00:00Z", { storage: 10n * GB }),
      sample(org, "db-a", "a2", "2025-03-19T01:00:00Z", { storage: 12n * GB }),
      sample(org, "db-b", "b1", "2025-03-19T00:00:00Z", { storage: 3n * GB }),
      sample(org, "db-b", "b2", "2025-03-19T01:00:00Z", { storage: 3n * GB }),
    );
    const before = await usage(org);
    expect(before.storage?.quantity).toBe(15);
    // (10 + 3) GB-hours / 744 × 0.125 = 0.00218…
    expect(before.storage?.amount).toBe(0.0022);

    await client.recordStatusEvents({ events: [ev(org, `${org}/db-b`, "micro", "deleted", "2025-03-19T01:00:05Z")] });
    const after = await usage(org);
    expect(after.storage).toMatchObject({ quantity: 12, amount: 0.0022 });
  });
});

describe("idempotency", () => {
  it("records a resent sample once, whatever it says the second time", async () => {
    const org = newOrg();
    const batch = [
      sample(org, "db-a", "s1", "2025-03-05T00:00:00Z", { storage: 100n * GB, out: 40n * GB, in: GB }),
      sample(org, "db-a", "s2", "2025-03-05T01:00:00Z", { storage: 100n * GB, out: 120n * GB, in: 2n * GB }),
    ];
    expect(await record(...batch)).toBe(2);
    const first = await usage(org);
    // 100 GB-hours: 100/744 × 0.125 = 0.0168; 120 GB out, 20 beyond the free 100 at 0.05.
    expect(first).toMatchObject({ storage: { quantity: 100, amount: 0.0168 }, transfer: { quantity: 120, amount: 1 }, total: 1.0168 });

    expect(await record(...batch)).toBe(0);
    // Same ids, other content (and a repeat within the batch): nothing recorded.
    const altered = sample(org, "db-a", "s2", "2025-03-06T00:00:00Z", { storage: 900n * GB, out: 500n * GB, epoch: "e9" });
    expect(await record(altered, altered)).toBe(0);
    expect(await usage(org)).toEqual(first);

    // A new sample sent twice in one batch counts once.
    const s3 = sample(org, "db-a", "s3", "2025-03-05T02:00:00Z", { storage: 100n * GB, out: 130n * GB });
    expect(await record(s3, s3, batch[0]!)).toBe(1);
    expect((await usage(org)).transfer).toMatchObject({ quantity: 130, amount: 1.5 });
  });

  it("counts a batch delivered twice at the same time once", async () => {
    const org = newOrg();
    const batch = [1, 2, 3, 4].map((i) =>
      sample(org, `db-${i % 2}`, `s${i}`, `2025-03-07T0${i}:00:00Z`, { storage: 50n * GB, out: BigInt(i) * 10n * GB }),
    );
    const recorded = await Promise.all([record(...batch), record(...[...batch].reverse()), record(...batch)]);
    expect(recorded.reduce((a, b) => a + b, 0)).toBe(4);
    // db-0: 40 GB out (s2 20 → s4 40); db-1: 30 GB (s1 10 → s3 30). Storage: 50 GB for 2 h on each.
    expect(await usage(org)).toMatchObject({ transfer: { quantity: 70, amount: 0 }, storage: { quantity: 100, amount: 0.0336 } });
  });
});

describe("transfer", () => {
  it("takes a new epoch's counters from zero: a restart neither loses nor doubles bytes", async () => {
    const org = newOrg();
    await record(
      sample(org, "db-a", "s1", "2025-03-08T00:00:00Z", { epoch: "agent-1", out: 10n * GB }),
      sample(org, "db-a", "s2", "2025-03-08T00:00:30Z", { epoch: "agent-1", out: 30n * GB }),
    );
    // The agent restarts: its counters start at zero in a new epoch; 5 GB went out before its first sample.
    await record(sample(org, "db-a", "s3", "2025-03-08T00:01:00Z", { epoch: "agent-2", out: 5n * GB }));
    expect((await usage(org)).transfer?.quantity).toBe(35);
    await record(sample(org, "db-a", "s4", "2025-03-08T00:01:30Z", { epoch: "agent-2", out: 25n * GB }));
    // An old epoch's sample delivered late, below what it already counted, adds nothing.
    expect(await record(sample(org, "db-a", "s1b", "2025-03-08T00:00:15Z", { epoch: "agent-1", out: 20n * GB }))).toBe(1);
    expect((await usage(org)).transfer).toMatchObject({ quantity: 55, amount: 0 });
  });

  it("charges 0.05 per GB only beyond 100 GB per organization per month", async () => {
    const org = newOrg();
    await record(
      sample(org, "db-a", "a1", "2025-03-11T00:00:00Z", { out: 60n * GB }),
      sample(org, "db-b", "b1", "2025-03-11T00:00:00Z", { out: 40n * GB }),
      // Last month's transfer has its own allowance.
      sample(org, "db-a", "a0", "2025-02-27T00:00:00Z", { epoch: "old", out: 500n * GB }),
    );
    expect((await usage(org)).transfer).toMatchObject({ quantity: 100, amount: 0 });
    await record(sample(org, "db-b", "b2", "2025-03-11T00:00:30Z", { out: 40n * GB + 1_000_000n }));
    expect((await usage(org)).transfer).toMatchObject({ quantity: 100.001, amount: 0.0001 });
    await record(sample(org, "db-b", "b3", "2025-03-11T00:01:00Z", { out: 41n * GB }));
    expect(await usage(org)).toMatchObject({ transfer: { quantity: 101, amount: 0.05 }, total: 0.05 });
    // Ingress (client → database) is not billed.
    await record(sample(org, "db-b", "b4", "2025-03-11T00:01:30Z", { out: 41n * GB, in: 900n * GB }));
    expect((await usage(org)).transfer).toMatchObject({ quantity: 101, amount: 0.05 });
  });

  it("gives the same usage whatever order the samples arrive in", async () => {
    const points: [string, string, Measured][] = [
      ["s1", "2025-03-12T00:00:00Z", { storage: 20n * GB, epoch: "x", out: 10n * GB }],
      ["s2", "2025-03-12T00:30:00Z", { storage: 40n * GB, epoch: "x", out: 70n * GB }],
      ["s3", "2025-03-12T01:00:00Z", { storage: 10n * GB, epoch: "x", out: 90n * GB }],
      ["s4", "2025-03-12T01:45:00Z", { storage: 30n * GB, epoch: "y", out: 15n * GB }],
      ["s5", "2025-03-12T05:00:00Z", { storage: 30n * GB, epoch: "y", out: 60n * GB }],
      ["s6", "2025-03-12T05:10:00Z", { storage: 5n * GB, epoch: "y", out: 65n * GB }],
    ];
    const inOrder = newOrg();
    const reversed = newOrg();
    const oneByOne = newOrg();
    await record(...points.map(([id, at, m]) => sample(inOrder, "db-a", id, at, m)));
    await record(...points.map(([id, at, m]) => sample(reversed, "db-a", id, at, m)).reverse());
    for (const i of [4, 1, 5, 0, 3, 2]) {
      const [id, at, m] = points[i]!;
      await record(sample(oneByOne, "db-a", id, at, m));
    }
    const expected = await usage(inOrder);
    // 20×0.5 + 40×0.5 + 10×0.75 + 30×2 (capped from 3.25) + 30×(1/6) = 102.5 GB-hours; out 90 + 65 = 155 GB.
    expect(expected).toMatchObject({ storage: { quantity: 5, amount: 0.0172 }, transfer: { quantity: 155, amount: 2.75 } });
    expect(await usage(reversed)).toEqual(expected);
    expect(await usage(oneByOne)).toEqual(expected);
  });
});

describe("invoices", () => {
  it("bill storage in GB-months of each month across the boundary and transfer beyond the free 100 GB", async () => {
    const org = newOrg();
    clock.set("2025-03-20T12:00:00Z");
    await record(
      // 1,000 GB from Feb 28 23:00 to Mar 1 01:00: one hour in each month.
      sample(org, "db-a", "s1", "2025-02-28T23:00:00Z", { storage: 1000n * GB, out: 150n * GB }),
      sample(org, "db-a", "s2", "2025-03-01T01:00:00Z", { storage: 1000n * GB, out: 150n * GB }),
    );
    await closeEndedPeriods(env.ctx);
    clock.set("2025-04-01T00:00:00Z");
    await closeEndedPeriods(env.ctx);
    clock.set(NOW);
    const invoices = (await client.listInvoices({ organizationId: org })).invoices;
    const lines = Object.fromEntries(invoices.map((i) => [i.period, i.lines.map((l) => [l.description, l.quantity, l.unit, l.amount])]));
    expect(lines).toEqual({
      // 1,000 GB-hours / 672 h = 1.4881 GB-months × 0.125 = 0.186; 150 GB out, 50 beyond the free 100.
      "2025-02": [
        ["Storage", 1.4881, "GB-month", 0.19],
        ["Data transfer beyond 100 GB free", 50, "GB", 2.5],
      ],
      // 1,000 GB-hours / 744 h = 1.3441 GB-months × 0.125 = 0.168; no transfer.
      "2025-03": [["Storage", 1.3441, "GB-month", 0.17]],
    });
    expect(invoices.map((i) => [i.period, i.amount])).toEqual([
      ["2025-03", 0.17],
      ["2025-02", 2.69],
    ]);
  });

  it("invoice a month already closed when a sample for it arrives late", async () => {
    const org = newOrg();
    clock.set("2025-04-01T00:00:00Z");
    // March: 1 GB out, within the allowance: closed without an invoice.
    await record(sample(org, "db-a", "s1", "2025-03-02T00:00:00Z", { out: 1n * GB }));
    await closeEndedPeriods(env.ctx);
    expect((await client.listInvoices({ organizationId: org })).invoices).toEqual([]);
    // February's sample, delivered late: 120 GB out.
    await record(sample(org, "db-a", "s0", "2025-02-25T00:00:00Z", { epoch: "feb", out: 120n * GB }));
    await closeEndedPeriods(env.ctx);
    clock.set(NOW);
    const invoices = (await client.listInvoices({ organizationId: org })).invoices;
    expect(invoices.map((i) => [i.period, i.amount])).toEqual([["2025-02", 1]]);
  });
});

describe("retention", () => {
  // 40 days before NOW: 2025-02-08T12:00Z. Samples up to MAX_GAP_MS (2 h) before it are kept as neighbours.
  const HOUR_MS = 3_600_000n;
  const february = async (org: string) => {
    const { rows } = await env.ctx.pool.query<{ storage: string; egress: string }>(
      "SELECT storage_byte_ms::text AS storage, egress_bytes::text AS egress FROM metered_months WHERE database_id = $1 AND period = '2025-02-01'",
      [`${org}/db-a`],
    );
    return { storage: BigInt(rows[0]!.storage), egress: BigInt(rows[0]!.egress) };
  };
  const stored = async (org: string) =>
    (
      await env.ctx.pool.query<{ sample_id: string }>("SELECT sample_id FROM usage_samples WHERE database_id = $1 ORDER BY sampled_at", [
        `${org}/db-a`,
      ])
    ).rows.map((r) => r.sample_id);

  it("purges samples past USAGE_SAMPLE_RETENTION_DAYS, keeps the horizon's neighbours, and ignores a sample older than it", async () => {
    const org = newOrg();
    clock.set("2025-02-09T00:00:00Z");
    await record(
      sample(org, "db-a", "s08", "2025-02-08T08:00:00Z", { storage: 1n * GB, out: 1n * GB }),
      sample(org, "db-a", "s09", "2025-02-08T09:00:00Z", { storage: 1n * GB, out: 1n * GB }),
      sample(org, "db-a", "s1030", "2025-02-08T10:30:00Z", { storage: 1n * GB, out: 1n * GB }),
      sample(org, "db-a", "s13", "2025-02-08T13:00:00Z", { storage: 1n * GB, out: 1n * GB }),
    );
    // 1 GB for 1 h + 1.5 h + 2 h (the gap to 13:00 capped).
    expect(await february(org)).toEqual({ storage: (45n * GB * HOUR_MS) / 10n, egress: 1n * GB });

    clock.set(NOW);
    expect(env.ctx.usageSampleRetentionDays).toBe(40);
    // Batches of one: a statement per sample before 10:00.
    expect(await purgeUsageSamples(env.ctx, 1)).toBe(2);
    expect(await stored(org)).toEqual(["s1030", "s13"]);
    expect(await purgeUsageSamples(env.ctx)).toBe(0);

    // Older than the horizon: neither stored nor accrued (it would add 49 GB out and storage).
    expect(await record(sample(org, "db-a", "late-old", "2025-02-08T11:59:00Z", { storage: 9n * GB, out: 50n * GB }))).toBe(0);
    expect(await february(org)).toEqual({ storage: (45n * GB * HOUR_MS) / 10n, egress: 1n * GB });
    expect(await stored(org)).toEqual(["s1030", "s13"]);

    // At the horizon: fitted between its kept neighbours, 10:30 → 12:00 at 1 GB and 12:00 → 13:00 at 3 GB instead of 2 h at 1 GB.
    expect(await record(sample(org, "db-a", "late-ok", "2025-02-08T12:00:00Z", { storage: 3n * GB, out: 1n * GB }))).toBe(1);
    expect((await february(org)).storage).toBe(7n * GB * HOUR_MS);
  });
});

describe("validation", () => {
  it("refuses a batch with an invalid sample, naming the fields", async () => {
    const org = newOrg();
    const bad = sample(org, "db-a", "", "2025-03-01T00:00:00Z", { storage: -1n, epoch: "" });
    const err = await rejection(record(sample(org, "db-a", "ok", "2025-03-01T00:00:00Z"), bad));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err).map((v) => v.field)).toEqual([
      "samples[1].sample_id",
      "samples[1].counters_epoch",
      "samples[1].storage_bytes",
    ]);
    expect(violationsOf(await rejection(record()))).toEqual([{ field: "samples", message: "must contain at least one sample" }]);
    // Nothing of the refused batch was stored.
    expect(await record(sample(org, "db-a", "ok", "2025-03-01T00:00:00Z"))).toBe(1);
  });
});
