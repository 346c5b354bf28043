import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService, type GetUsageResponse, type Invoice, type StatusEvent } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeEndedPeriods } from "../src/invoices/close.ts";
import { routes } from "../src/routes.ts";
import { createTestContext, type ManualClock, rejection, replicaEvent as rep, statusEvent as ev, violationsOf } from "./helpers.ts";

// Month-to-date: 2025-03-01 .. 2025-03-20T12:00Z.
const NOW = "2025-03-20T12:00:00Z";

let env: Awaited<ReturnType<typeof createTestContext>>;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let orgSeq = 0;
const newOrg = () => `org-rep${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext(NOW);
  clock = env.clock;
  client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
});

afterAll(async () => {
  await env.close();
});

async function record(...events: StatusEvent[]): Promise<number> {
  return (await client.recordStatusEvents({ events })).recorded;
}

async function usage(organizationId: string): Promise<GetUsageResponse> {
  return await client.getUsage({ organizationId });
}

const linesOf = (invoice: Invoice) =>
  invoice.lines.map((l) => ({ description: l.description, quantity: l.quantity, unit: l.unit, amount: l.amount }));

describe("replica status events", () => {
  it("accrue replica hours at each replica's tier, beside the databases' compute and not in it", async () => {
    clock.set(NOW);
    const org = newOrg();
    await record(
      // The primary: 03-02 00:00 .. now = 444 h of small (0.06/h).
      ev(org, "db-p", "small", "running", "2025-03-02T00:00:00Z"),
      // 10 h of small.
      rep(org, "rep-a", "small", "running", "2025-03-02T00:00:00Z"),
      rep(org, "rep-a", "small", "stopped", "2025-03-02T10:00:00Z"),
      // Still running: 12 h of medium (0.12/h) so far.
      rep(org, "rep-b", "medium", "running", "2025-03-20T00:00:00Z"),
      // Running since February: the 5 h of March, large (0.24/h).
      rep(org, "rep-c", "large", "running", "2025-02-27T00:00:00Z"),
      rep(org, "rep-c", "large", "stopping", "2025-03-01T05:00:00Z"),
    );
    const r = await usage(org);
    expect(r.computeHours).toMatchObject({ quantity: 444, amount: 26.64 });
    // 0.6 + 1.44 + 1.2.
    expect(r.replicaHours).toMatchObject({ quantity: 27, amount: 3.24 });
    expect(r.total).toBe(29.88);

    // The meter runs on with the clock.
    clock.set("2025-03-20T13:30:00Z");
    expect((await usage(org)).replicaHours).toMatchObject({ quantity: 28.5, amount: 3.42 });
  });

  it("stop the meter on every status but running: stopping, deleted, failed, promoted and one billing has not heard of", async () => {
    clock.set(NOW);
    const org = newOrg();
    const start = (id: string) => rep(org, id, "micro", "running", "2025-03-10T00:00:00Z");
    expect(
      await record(
        start("rep-1"),
        rep(org, "rep-1", "micro", "stopping", "2025-03-10T01:00:00Z"),
        start("rep-2"),
        rep(org, "rep-2", "micro", "deleted", "2025-03-10T02:00:00Z"),
        start("rep-3"),
        rep(org, "rep-3", "micro", "failed", "2025-03-10T03:00:00Z"),
        // Promoted: the replica's meter stops and the new database's compute takes over (1 h).
        start("rep-4"),
        rep(org, "rep-4", "micro", "promoted", "2025-03-10T04:00:00Z"),
        ev(org, "db-new", "micro", "starting", "2025-03-10T04:00:00Z"),
        ev(org, "db-new", "micro", "running", "2025-03-10T04:01:00Z"),
        ev(org, "db-new", "micro", "stopped", "2025-03-10T05:01:00Z"),
        // A status billing does not know is accepted and stops the meter too.
        start("rep-5"),
        rep(org, "rep-5", "micro", "hibernating", "2025-03-10T05:00:00Z"),
      ),
    ).toBe(13);
    // 1 + 2 + 3 + 4 + 5 h of micro (0.02/h).
    expect((await usage(org)).replicaHours).toMatchObject({ quantity: 15, amount: 0.3 });
    expect((await usage(org)).computeHours).toMatchObject({ quantity: 1, amount: 0.02 });

    // Started again with its primary: the meter runs again from running.
    await record(
      rep(org, "rep-1", "micro", "starting", "2025-03-11T00:00:00Z"),
      rep(org, "rep-1", "micro", "running", "2025-03-11T00:05:00Z"),
      rep(org, "rep-1", "micro", "stopped", "2025-03-11T01:05:00Z"),
    );
    expect((await usage(org)).replicaHours).toMatchObject({ quantity: 16, amount: 0.32 });
  });

  it("store their kind: empty is a database; an unknown kind is refused, naming the field, and nothing of the batch is stored", async () => {
    clock.set(NOW);
    const org = newOrg();
    const good = rep(org, "rep-a", "small", "running", "2025-03-20T00:00:00Z");
    const standby = rep(org, "rep-b", "small", "running", "2025-03-20T00:00:00Z");
    standby.kind = "standby";
    const capital = rep(org, "rep-c", "small", "running", "2025-03-20T00:00:00Z");
    capital.kind = "Replica";
    const err = await rejection(client.recordStatusEvents({ events: [good, standby, capital] }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      { field: "events[1].kind", message: "must be one of: database, replica (empty means database)" },
      { field: "events[2].kind", message: "must be one of: database, replica (empty means database)" },
    ]);
    expect((await usage(org)).replicaHours).toMatchObject({ quantity: 0, amount: 0 });

    const unnamed = ev(org, "db-a", "small", "running", "2025-03-20T00:00:00Z");
    const named = ev(org, "db-b", "small", "running", "2025-03-20T00:00:00Z");
    named.kind = "database";
    expect(await record(good, unnamed, named)).toBe(3);
    const { rows } = await env.ctx.pool.query(
      "SELECT database_id, kind FROM status_events WHERE organization_id = $1 ORDER BY database_id",
      [org],
    );
    expect(rows).toEqual([
      { database_id: "db-a", kind: "database" },
      { database_id: "db-b", kind: "database" },
      { database_id: "rep-a", kind: "replica" },
    ]);
    const r = await usage(org);
    expect(r.computeHours).toMatchObject({ quantity: 24, amount: 1.44 });
    expect(r.replicaHours).toMatchObject({ quantity: 12, amount: 0.72 });
  });
});

describe("a closed month's invoice", () => {
  it("carries one Replicas line, the replicas' hours at their tiers rounded to cents once; compute lines without them", async () => {
    const org = newOrg();
    await record(
      ev(org, "db-a", "small", "running", "2025-03-01T00:00:00Z"),
      ev(org, "db-a", "small", "stopped", "2025-03-01T10:00:00Z"),
      // 10 h of small = 0.60.
      rep(org, "rep-a", "small", "running", "2025-03-01T00:00:00Z"),
      rep(org, "rep-a", "small", "stopped", "2025-03-01T10:00:00Z"),
      // Twice 15 min of micro = 0.005 each.
      rep(org, "rep-b", "micro", "running", "2025-03-05T00:00:00Z"),
      rep(org, "rep-b", "micro", "deleted", "2025-03-05T00:15:00Z"),
      rep(org, "rep-d", "micro", "running", "2025-03-06T00:00:00Z"),
      rep(org, "rep-d", "micro", "stopped", "2025-03-06T00:15:00Z"),
      // Runs into April: 4 h of large in March = 0.96, all 720 h of April = 172.80.
      rep(org, "rep-c", "large", "running", "2025-03-31T20:00:00Z"),
    );

    clock.set("2025-04-01T00:00:00Z");
    await closeEndedPeriods(env.ctx);
    const [march] = (await client.listInvoices({ organizationId: org })).invoices;
    // 0.6 + 0.005 + 0.005 + 0.96 = 1.57, rounded once (per interval, 0.01 + 0.01 would have made it 1.58).
    expect(linesOf(march!)).toEqual([
      { description: "Compute, small", quantity: 10, unit: "hour", amount: 0.6 },
      { description: "Replicas", quantity: 14.5, unit: "hour", amount: 1.57 },
    ]);
    expect(march).toMatchObject({ period: "2025-03", amount: 2.17 });

    clock.set("2025-05-01T00:00:00Z");
    await closeEndedPeriods(env.ctx);
    const [april] = (await client.listInvoices({ organizationId: org })).invoices;
    expect(april?.period).toBe("2025-04");
    expect(linesOf(april!)).toEqual([{ description: "Replicas", quantity: 720, unit: "hour", amount: 172.8 }]);
  });
});
