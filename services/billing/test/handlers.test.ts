import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService, type GetUsageResponse } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../src/routes.ts";
import { createTestContext, type ManualClock, rejection, statusEvent as ev, violationsOf } from "./helpers.ts";

// "Now" for most tests: the month-to-date period is 2025-03-01 .. 2025-03-20T12:00Z.
const NOW = "2025-03-20T12:00:00Z";

let env: Awaited<ReturnType<typeof createTestContext>>;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let orgSeq = 0;
const newOrg = () => `org-test${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext(NOW);
  clock = env.clock;
  client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
});

afterAll(async () => {
  await env.close();
});

async function usage(organizationId: string): Promise<GetUsageResponse> {
  return await client.getUsage({ organizationId });
}

describe("RecordStatusEvents", () => {
  it("counts only events it has not seen, across and within batches", async () => {
    clock.set(NOW);
    const org = newOrg();
    const a = ev(org, "db-a", "micro", "running", "2025-03-02T00:00:00Z");
    const b = ev(org, "db-a", "micro", "stopped", "2025-03-02T05:00:00Z");
    expect((await client.recordStatusEvents({ events: [a, b] })).recorded).toBe(2);
    // Redelivery of the whole batch.
    expect((await client.recordStatusEvents({ events: [a, b] })).recorded).toBe(0);
    // A batch mixing a redelivered event with a new one, the new one sent twice.
    const c = ev(org, "db-a", "micro", "running", "2025-03-03T00:00:00Z");
    expect((await client.recordStatusEvents({ events: [b, c, c] })).recorded).toBe(1);

    const stored = await env.ctx.pool.query("SELECT count(*)::int AS n FROM status_events WHERE organization_id = $1", [org]);
    expect(stored.rows[0].n).toBe(3);
    // Duplicates changed nothing: 5 h on 03-02, then 03-03 00:00 .. 03-20 12:00 = 420 h.
    expect((await usage(org)).computeHours).toMatchObject({ quantity: 425, amount: 8.5 });
  });

  it("keeps the first copy when an event id is redelivered with different content", async () => {
    clock.set(NOW);
    const org = newOrg();
    const first = ev(org, "db-a", "small", "running", "2025-03-20T02:00:00Z", "evt-fixed-id");
    const altered = ev(org, "db-a", "xlarge", "running", "2025-03-01T00:00:00Z", "evt-fixed-id");
    expect((await client.recordStatusEvents({ events: [first] })).recorded).toBe(1);
    expect((await client.recordStatusEvents({ events: [altered] })).recorded).toBe(0);
    expect((await usage(org)).computeHours).toMatchObject({ quantity: 10, amount: 0.6 });
  });

  it("gives the same usage whatever order the events arrive in", async () => {
    clock.set(NOW);
    const times: [string, string][] = [
      ["running", "2025-03-02T00:00:00Z"],
      ["stopping", "2025-03-02T03:00:00Z"],
      ["stopped", "2025-03-02T03:01:00Z"],
      ["starting", "2025-03-04T00:00:00Z"],
      ["running", "2025-03-04T00:02:00Z"],
      ["stopping", "2025-03-04T08:02:00Z"],
    ];
    const inOrder = newOrg();
    const shuffled = newOrg();
    const oneByOne = newOrg();
    await client.recordStatusEvents({ events: times.map(([s, t]) => ev(inOrder, "db-a", "medium", s, t)) });
    // Reverse order in one batch.
    await client.recordStatusEvents({ events: times.map(([s, t]) => ev(shuffled, "db-a", "medium", s, t)).reverse() });
    // Separate deliveries, the stop arriving before the start.
    for (const i of [5, 1, 3, 0, 2, 4]) {
      const [s, t] = times[i]!;
      await client.recordStatusEvents({ events: [ev(oneByOne, "db-a", "medium", s, t)] });
    }
    // 3 h + 8 h at medium (0.12/h).
    const expected = { quantity: 11, amount: 1.32 };
    expect((await usage(inOrder)).computeHours).toMatchObject(expected);
    expect((await usage(shuffled)).computeHours).toMatchObject(expected);
    expect((await usage(oneByOne)).computeHours).toMatchObject(expected);
  });

  it("rejects invalid events with one violation per field and stores none of the batch", async () => {
    clock.set(NOW);
    const org = newOrg();
    const good = ev(org, "db-a", "micro", "running", "2025-03-02T00:00:00Z");
    const bad = ev(org, "", "huge", "Running!", "2025-03-02T00:00:00Z", "");
    bad.occurredAt = undefined;
    const err = await rejection(client.recordStatusEvents({ events: [good, bad] }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      { field: "events[1].event_id", message: "is required" },
      { field: "events[1].database_id", message: "is required" },
      { field: "events[1].tier", message: "must be one of: micro, small, medium, large, xlarge" },
      { field: "events[1].status", message: "must be a lowercase status name such as running" },
      { field: "events[1].occurred_at", message: "is required" },
    ]);
    // The valid event of the refused batch was not written.
    expect((await client.recordStatusEvents({ events: [good] })).recorded).toBe(1);
  });

  it("rejects empty fields, ids with spaces and out-of-range timestamps", async () => {
    const e = ev("", "db a", "", "", "2025-03-02T00:00:00Z", "evt-1");
    e.occurredAt!.seconds = -1n;
    const err = await rejection(client.recordStatusEvents({ events: [e] }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err).map((v) => v.field)).toEqual([
      "events[0].organization_id",
      "events[0].database_id",
      "events[0].tier",
      "events[0].status",
      "events[0].occurred_at",
    ]);
    expect(violationsOf(err)[1]?.message).toBe("must be 1-128 printable characters without spaces");
    expect(violationsOf(err)[4]?.message).toBe("must be a timestamp between 1970-01-01 and 9999-12-31");
  });

  it("rejects an empty batch and an oversized one", async () => {
    const empty = await rejection(client.recordStatusEvents({ events: [] }));
    expect(empty.code).toBe(Code.InvalidArgument);
    expect(violationsOf(empty)).toEqual([{ field: "events", message: "must contain at least one event" }]);

    const org = newOrg();
    const many = Array.from({ length: 1001 }, () => ev(org, "db-a", "micro", "running", "2025-03-02T00:00:00Z"));
    const big = await rejection(client.recordStatusEvents({ events: many }));
    expect(violationsOf(big)).toEqual([{ field: "events", message: "must contain at most 1000 events" }]);
  });
});

describe("GetUsage", () => {
  it("reports the current UTC calendar month, zero for an organization without events", async () => {
    clock.set(NOW);
    const r = await usage(newOrg());
    expect(timestampDate(r.periodStart!).toISOString()).toBe("2025-03-01T00:00:00.000Z");
    expect(timestampDate(r.periodEnd!).toISOString()).toBe("2025-04-01T00:00:00.000Z");
    expect(r.computeHours).toMatchObject({ quantity: 0, amount: 0 });
    expect(r.storageGb).toMatchObject({ quantity: 0, amount: 0 });
    expect(r.dataTransferGb).toMatchObject({ quantity: 0, amount: 0 });
    expect(r.replicaHours).toMatchObject({ quantity: 0, amount: 0 });
    expect(r.total).toBe(0);
    expect(r.currency).toBe("USD");

    clock.set("2025-12-31T23:59:59.999Z");
    const dec = await usage(newOrg());
    expect(timestampDate(dec.periodStart!).toISOString()).toBe("2025-12-01T00:00:00.000Z");
    expect(timestampDate(dec.periodEnd!).toISOString()).toBe("2026-01-01T00:00:00.000Z");
  });

  it("counts running time across running → stopped → running, rounded to 4 decimals", async () => {
    clock.set(NOW);
    const org = newOrg();
    await client.recordStatusEvents({
      events: [
        ev(org, "db-a", "micro", "running", "2025-03-02T00:00:00Z"),
        ev(org, "db-a", "micro", "stopping", "2025-03-02T10:20:00Z"),
        ev(org, "db-a", "micro", "stopped", "2025-03-02T10:21:00Z"),
        ev(org, "db-a", "micro", "starting", "2025-03-09T23:59:00Z"),
        ev(org, "db-a", "micro", "running", "2025-03-10T00:00:00Z"),
      ],
    });
    // 10 h 20 min, then 03-10 00:00 .. 03-20 12:00 = 252 h: 262.33333… h × 0.02 = 5.246666… USD.
    const r = await usage(org);
    expect(r.computeHours).toMatchObject({ quantity: 262.3333, amount: 5.2467 });
    expect(r.total).toBe(5.2467);
  });

  it("counts a database running since before the month from the month's start", async () => {
    clock.set(NOW);
    const org = newOrg();
    await client.recordStatusEvents({
      events: [
        // Running since February, stopped on 03-03: 48 h of March.
        ev(org, "db-feb", "small", "running", "2025-02-25T00:00:00Z"),
        ev(org, "db-feb", "small", "stopped", "2025-03-03T00:00:00Z"),
        // A longer history: only the last change before March matters (running since 02-27).
        ev(org, "db-jan", "micro", "running", "2025-01-10T00:00:00Z"),
        ev(org, "db-jan", "micro", "stopped", "2025-01-20T00:00:00Z"),
        ev(org, "db-jan", "micro", "running", "2025-02-27T00:00:00Z"),
        ev(org, "db-jan", "micro", "stopped", "2025-03-01T06:00:00Z"),
        // Stopped before March: nothing.
        ev(org, "db-old", "large", "running", "2025-02-01T00:00:00Z"),
        ev(org, "db-old", "large", "stopped", "2025-02-02T00:00:00Z"),
      ],
    });
    // 48 h × 0.06 + 6 h × 0.02 = 2.88 + 0.12.
    const r = await usage(org);
    expect(r.computeHours).toMatchObject({ quantity: 54, amount: 3 });
    expect(r.total).toBe(3);
  });

  it("starts a new month from zero, still counting what runs into it", async () => {
    const org = newOrg();
    clock.set(NOW);
    await client.recordStatusEvents({ events: [ev(org, "db-a", "micro", "running", "2025-03-31T12:00:00Z")] });
    clock.set("2025-04-01T03:00:00Z");
    const r = await usage(org);
    expect(timestampDate(r.periodStart!).toISOString()).toBe("2025-04-01T00:00:00.000Z");
    expect(r.computeHours).toMatchObject({ quantity: 3, amount: 0.06 });
  });

  it("prices each interval at the tier recorded when it opened", async () => {
    clock.set(NOW);
    const org = newOrg();
    await client.recordStatusEvents({
      events: [
        ev(org, "db-s", "small", "running", "2025-03-05T00:00:00Z"),
        ev(org, "db-s", "small", "stopped", "2025-03-05T10:00:00Z"),
        ev(org, "db-l", "large", "running", "2025-03-06T00:00:00Z"),
        ev(org, "db-l", "large", "stopped", "2025-03-06T05:00:00Z"),
        // Resized micro → medium: 4 h at micro, then 2 h at medium.
        ev(org, "db-r", "micro", "running", "2025-03-07T00:00:00Z"),
        ev(org, "db-r", "medium", "resizing", "2025-03-07T04:00:00Z"),
        ev(org, "db-r", "medium", "running", "2025-03-07T04:30:00Z"),
        ev(org, "db-r", "medium", "stopped", "2025-03-07T06:30:00Z"),
      ],
    });
    // small 10 h × 0.06 + large 5 h × 0.24 + micro 4 h × 0.02 + medium 2 h × 0.12.
    const r = await usage(org);
    expect(r.computeHours).toMatchObject({ quantity: 21, amount: 2.12 });
    expect(r.total).toBe(2.12);
  });

  it("does not count another organization's databases", async () => {
    clock.set(NOW);
    const mine = newOrg();
    const theirs = newOrg();
    await client.recordStatusEvents({
      events: [
        ev(mine, "db-mine", "micro", "running", "2025-03-20T00:00:00Z"),
        ev(theirs, "db-theirs", "xlarge", "running", "2025-02-01T00:00:00Z"),
        ev(theirs, "db-theirs2", "xlarge", "running", "2025-03-01T00:00:00Z"),
      ],
    });
    expect((await usage(mine)).computeHours).toMatchObject({ quantity: 12, amount: 0.24 });
    expect((await usage(theirs)).computeHours).toMatchObject({ quantity: 936, amount: 449.28 });
  });

  it("follows the injected clock: events after now do not count until now passes them", async () => {
    const org = newOrg();
    clock.set(NOW);
    await client.recordStatusEvents({
      events: [ev(org, "db-a", "micro", "running", "2025-03-19T12:00:00Z"), ev(org, "db-a", "micro", "stopped", "2025-03-21T00:00:00Z")],
    });
    expect((await usage(org)).computeHours).toMatchObject({ quantity: 24, amount: 0.48 });
    clock.set("2025-03-20T12:09:00Z");
    expect((await usage(org)).computeHours).toMatchObject({ quantity: 24.15, amount: 0.483 });
    clock.set("2025-03-25T00:00:00Z");
    expect((await usage(org)).computeHours).toMatchObject({ quantity: 36, amount: 0.72 });
  });

  it("rejects a missing organization id", async () => {
    const err = await rejection(usage(""));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([{ field: "organization_id", message: "is required" }]);
  });
});
