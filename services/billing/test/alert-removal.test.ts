import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { withTransaction } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkAlerts } from "../src/alerts/check.ts";
import { relayAlertNotifications } from "../src/alerts/relay.ts";
import type { AppContext } from "../src/context.ts";
import { lockAlerts, removeAlert } from "../src/db/alerts.ts";
import { MAX_ALERTS_PER_ORGANIZATION } from "../src/handlers/create-alert.ts";
import { routes } from "../src/routes.ts";
import { startFakeIdentity, type FakeIdentity } from "./fake-identity.ts";
import { createTestContext, type ManualClock, rejection, statusEvent as ev } from "./helpers.ts";

let env: Awaited<ReturnType<typeof createTestContext>>;
let ctx: AppContext;
let identity: FakeIdentity;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let orgSeq = 0;
const newOrg = () => `org-alrm${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext("2025-03-01T00:00:00Z", { log: captureLog() });
  clock = env.clock;
  identity = await startFakeIdentity();
  ctx = { ...env.ctx, identity: identity.client };
  client = createClient(BillingService, createRouterTransport(routes(ctx)));
});

afterAll(async () => {
  await identity?.close();
  await env?.close();
});

async function alert(org: string, threshold: number) {
  return (await client.createAlert({ organizationId: org, threshold, currency: "USD", channels: ["email"] })).alert!;
}

/** A small database (0.06 USD/h) running since the first of March: 0.06 × 240 = 14.40 USD by 11 March 00:00. */
async function spend(org: string): Promise<void> {
  await client.recordStatusEvents({ events: [ev(org, "db-a", "small", "running", "2025-03-01T00:00:00Z")] });
  clock.set("2025-03-11T00:00:00Z");
}

const noticesFor = (org: string) => identity.notices.filter((n) => n.organizationId === org);

async function firings(alertId: string): Promise<number> {
  return (await ctx.pool.query("SELECT count(*)::int AS n FROM alert_firings WHERE alert_id = $1", [alertId])).rows[0].n;
}

describe("ListAlerts", () => {
  it("lists the organization's alerts oldest first, and no other organization's", async () => {
    const org = newOrg();
    const other = newOrg();
    clock.set("2025-03-01T00:00:00Z");
    const first = await alert(org, 50);
    clock.set("2025-03-01T00:00:01Z");
    const second = await alert(org, 10);
    await alert(other, 99);
    const { alerts } = await client.listAlerts({ organizationId: org });
    expect(alerts).toEqual([first, second]);
    expect((await client.listAlerts({ organizationId: newOrg() })).alerts).toEqual([]);
  });
});

describe("DeleteAlert", () => {
  it("removes the alert from the list; an unknown, removed or other organization's alert is NOT_FOUND", async () => {
    const org = newOrg();
    const keep = await alert(org, 50);
    const gone = await alert(org, 60);
    await client.deleteAlert({ organizationId: org, id: gone.id });
    expect((await client.listAlerts({ organizationId: org })).alerts).toEqual([keep]);

    for (const [organizationId, id] of [
      [org, gone.id],
      [org, "alr-doesnotexist0000"],
      [newOrg(), keep.id],
    ]) {
      const err = await rejection(client.deleteAlert({ organizationId, id }));
      expect(err.code).toBe(Code.NotFound);
      expect(err.rawMessage).toBe("alert not found");
    }
    expect((await client.listAlerts({ organizationId: org })).alerts).toEqual([keep]);
    expect((await rejection(client.deleteAlert({ organizationId: org, id: "" }))).code).toBe(Code.InvalidArgument);
  });

  it("frees a slot under the per-organization cap", async () => {
    const org = newOrg();
    const made = [];
    for (let i = 0; i < MAX_ALERTS_PER_ORGANIZATION; i++) made.push(await alert(org, 10 + i));
    expect((await rejection(alert(org, 5))).code).toBe(Code.FailedPrecondition);
    await client.deleteAlert({ organizationId: org, id: made[0]!.id });
    await alert(org, 5);
    expect((await client.listAlerts({ organizationId: org })).alerts).toHaveLength(MAX_ALERTS_PER_ORGANIZATION);
  });

  it("a removed alert no longer fires; the others still do", async () => {
    clock.set("2025-03-01T00:00:00Z");
    const org = newOrg();
    const removed = await alert(org, 10);
    const kept = await alert(org, 12);
    await client.deleteAlert({ organizationId: org, id: removed.id });
    await spend(org);
    await checkAlerts(ctx);
    await relayAlertNotifications(ctx, identity.client);
    expect(await firings(removed.id)).toBe(0);
    expect(await firings(kept.id)).toBe(1);
    expect(noticesFor(org).map((n) => n.notificationId)).toEqual([`alert-${kept.id}-2025-03`]);
  });

  it("drops the notice of a firing not delivered yet, so nobody is mailed about a removed alert", async () => {
    clock.set("2025-03-01T00:00:00Z");
    const org = newOrg();
    const a = await alert(org, 10);
    await spend(org);
    expect(await checkAlerts(ctx)).toBeGreaterThanOrEqual(1);
    await client.deleteAlert({ organizationId: org, id: a.id });
    await relayAlertNotifications(ctx, identity.client);
    expect(noticesFor(org)).toEqual([]);
    const { rows } = await ctx.pool.query("SELECT delivered_at, abandoned_at, last_error FROM alert_notifications WHERE alert_id = $1", [
      a.id,
    ]);
    expect(rows).toEqual([{ delivered_at: null, abandoned_at: expect.any(Date), last_error: "alert removed" }]);
  });

  it("a check running while a removal commits waits for it, and then fires nothing", async () => {
    clock.set("2025-03-01T00:00:00Z");
    const org = newOrg();
    const a = await alert(org, 10);
    await spend(org);
    let checked: Promise<number> | undefined;
    await withTransaction(ctx.pool, async (db) => {
      await lockAlerts(db, org);
      expect(await removeAlert(db, org, a.id, clock.now())).toBe(true);
      // The check reads the month's total and then waits for the removal's lock before firing.
      checked = checkAlerts(ctx);
      await new Promise((r) => setTimeout(r, 300));
    });
    await checked;
    await relayAlertNotifications(ctx, identity.client);
    expect(await firings(a.id)).toBe(0);
    expect(noticesFor(org)).toEqual([]);
  });
});
