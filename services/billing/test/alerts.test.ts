import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { callerKey, createInternalClient, createPool, startServer, type RunningServer } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { IdentityService, NotifyOrganizationResponseSchema, type NotifyOrganizationRequest } from "@dbaas/proto/identity";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { checkAlerts } from "../src/alerts/check.ts";
import { relayAlertNotifications, retryDelayMs, SEND_LEASE_MS } from "../src/alerts/relay.ts";
import { startAlerting } from "../src/background.ts";
import type { AppContext } from "../src/context.ts";
import { MAX_ALERTS_PER_ORGANIZATION } from "../src/handlers/create-alert.ts";
import { routes } from "../src/routes.ts";
import { createTestContext, type ManualClock, rejection, SCHEMA, statusEvent as ev, violationsOf } from "./helpers.ts";

const SECRET = "billing-alerts-test-secret";
const RECIPIENTS = 3;

/**
 * Identity's NotifyOrganization over real HTTP/2 with internal credentials,
 * and nothing else of identity (its side is tested in identity): it records
 * every call, remembers the notification ids it accepted and answers a
 * repeated one with the first count, as the contract says. `refuse` fails a
 * call before anything is accepted; `afterAccept` runs between accepting and
 * answering.
 */
interface FakeIdentity {
  url: string;
  calls: { caller: string; req: NotifyOrganizationRequest }[];
  accepted: Map<string, number>;
  refuse?: (req: NotifyOrganizationRequest) => ConnectError | undefined;
  afterAccept?: (req: NotifyOrganizationRequest) => Promise<void>;
}

let env: Awaited<ReturnType<typeof createTestContext>>;
let ctx: AppContext;
let identity: Client<typeof IdentityService>;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let server: RunningServer;
const fake: FakeIdentity = { url: "", calls: [], accepted: new Map() };
const log = captureLog();
let orgSeq = 0;
const newOrg = () => `org-alr${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext("2025-03-01T00:00:00Z", { log });
  clock = env.clock;
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: captureLog(),
    routes: (router) =>
      router.service(IdentityService, {
        async notifyOrganization(req, hctx) {
          fake.calls.push({ caller: hctx.values.get(callerKey), req });
          const refused = fake.refuse?.(req);
          if (refused) throw refused;
          const first = fake.accepted.get(req.notificationId);
          if (first === undefined) fake.accepted.set(req.notificationId, RECIPIENTS);
          await fake.afterAccept?.(req);
          return create(NotifyOrganizationResponseSchema, { recipients: first ?? RECIPIENTS });
        },
      }),
  });
  fake.url = server.url;
  identity = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "billing" });
  ctx = { ...env.ctx, identity };
  client = createClient(BillingService, createRouterTransport(routes(ctx)));
});

afterAll(async () => {
  await server?.close();
  await env?.close();
});

beforeEach(() => {
  fake.refuse = undefined;
  fake.afterAccept = undefined;
  log.lines.length = 0;
});

/** The calls identity received about `org`. */
const callsFor = (org: string) => fake.calls.filter((c) => c.req.organizationId === org).map((c) => c.req);

/** One run of the alert loop: check, then relay. */
async function run(on: AppContext = ctx): Promise<void> {
  await checkAlerts(on);
  await relayAlertNotifications(on, identity);
}

/** A small database (0.06 USD/h) running from `since` on: 20 USD after 333 h 20 min. */
async function runSmall(org: string, since: string): Promise<void> {
  await client.recordStatusEvents({ events: [ev(org, "db-a", "small", "running", since)] });
}

async function alert(org: string, threshold: number) {
  return (await client.createAlert({ organizationId: org, threshold, currency: "USD", channels: ["email"] })).alert!;
}

async function notificationRow(notificationId: string) {
  const { rows } = await env.ctx.pool.query<{
    attempts: number;
    next_attempt_at: Date;
    last_error: string | null;
    delivered_at: Date | null;
    recipients: number | null;
    abandoned_at: Date | null;
  }>(
    "SELECT attempts, next_attempt_at, last_error, delivered_at, recipients, abandoned_at FROM alert_notifications WHERE notification_id = $1",
    [notificationId],
  );
  const row = rows[0];
  if (!row) throw new Error(`no alert notification ${notificationId}`);
  return row;
}

describe("CreateAlert", () => {
  it("stores an alert and answers it", async () => {
    clock.set("2025-03-05T10:00:00Z");
    const org = newOrg();
    const created = await alert(org, 12.5);
    expect(created.id).toMatch(/^alr-[a-z0-9]{16}$/);
    expect(created).toMatchObject({ organizationId: org, threshold: 12.5, currency: "USD", channels: ["email"] });
    expect(timestampDate(created.createdAt!).toISOString()).toBe("2025-03-05T10:00:00.000Z");
    const { rows } = await env.ctx.pool.query(
      "SELECT organization_id, threshold::float8 AS threshold, currency, channels FROM alerts WHERE id = $1",
      [created.id],
    );
    expect(rows).toEqual([{ organization_id: org, threshold: 12.5, currency: "USD", channels: ["email"] }]);
  });

  it("names every invalid field", async () => {
    const cases: [Parameters<typeof client.createAlert>[0], { field: string; message: string }[]][] = [
      [
        { organizationId: "", threshold: 0, currency: "", channels: [] },
        [
          { field: "organization_id", message: "is required" },
          { field: "threshold", message: "must be greater than 0" },
          { field: "currency", message: "is required" },
          { field: "channels", message: "must list at least one channel" },
        ],
      ],
      [
        { organizationId: "org-v", threshold: -5, currency: "usd", channels: ["sms"] },
        [
          { field: "threshold", message: "must be greater than 0" },
          { field: "currency", message: "must be one of: USD" },
          { field: "channels", message: "must each be one of: email" },
        ],
      ],
      [
        { organizationId: "org-v", threshold: 1_000_000.01, currency: "EUR", channels: ["email", "email"] },
        [
          { field: "threshold", message: "must be at most 1000000" },
          { field: "currency", message: "must be one of: USD" },
          { field: "channels", message: "must not repeat a channel" },
        ],
      ],
      [
        { organizationId: "org-v", threshold: Number.NaN, currency: "USD", channels: ["email"] },
        [{ field: "threshold", message: "must be greater than 0" }],
      ],
      [
        { organizationId: "org-v", threshold: Number.POSITIVE_INFINITY, currency: "USD", channels: ["email", "Email"] },
        [
          { field: "threshold", message: "must be at most 1000000" },
          { field: "channels", message: "must each be one of: email" },
        ],
      ],
    ];
    for (const [req, violations] of cases) {
      const err = await rejection(client.createAlert(req));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(violationsOf(err)).toEqual(violations);
    }
    const stored = await env.ctx.pool.query("SELECT count(*)::int AS n FROM alerts WHERE organization_id = 'org-v'");
    expect(stored.rows[0].n).toBe(0);
    // The bounds themselves are accepted.
    expect((await alert("org-v", 1_000_000)).threshold).toBe(1_000_000);
    expect((await alert("org-v", 0.0001)).threshold).toBe(0.0001);
  });

  it("caps an organization at 20 alerts, also when the requests race", async () => {
    const org = newOrg();
    const results = await Promise.allSettled(Array.from({ length: MAX_ALERTS_PER_ORGANIZATION + 5 }, (_, i) => alert(org, i + 1)));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(MAX_ALERTS_PER_ORGANIZATION);
    const refused = results.filter((r) => r.status === "rejected").map((r) => ConnectError.from(r.reason));
    expect(refused).toHaveLength(5);
    for (const err of refused) {
      expect(err.code).toBe(Code.FailedPrecondition);
      expect(err.rawMessage).toBe("an organization can have at most 20 alerts");
    }
    const stored = await env.ctx.pool.query("SELECT count(*)::int AS n FROM alerts WHERE organization_id = $1", [org]);
    expect(stored.rows[0].n).toBe(MAX_ALERTS_PER_ORGANIZATION);
    expect((await rejection(alert(org, 99))).code).toBe(Code.FailedPrecondition);
    // The cap is per organization.
    await alert(newOrg(), 99);
  });
});

describe("checking alerts", () => {
  it("fires once a month when the month-to-date total reaches the threshold, not below, and again the next month", async () => {
    const org = newOrg();
    clock.set("2025-03-01T00:00:00Z");
    await runSmall(org, "2025-03-01T00:00:00Z");
    const { id } = await alert(org, 20);

    // 333 h 19 min: 19.999 USD.
    clock.set("2025-03-14T21:19:00Z");
    await run();
    expect(callsFor(org)).toEqual([]);

    // 333 h 20 min: exactly 20 USD, the same figure GetUsage reports.
    clock.set("2025-03-14T21:20:00Z");
    expect((await client.getUsage({ organizationId: org })).total).toBe(20);
    await run();
    expect(fake.calls.filter((c) => c.req.organizationId === org).map((c) => c.caller)).toEqual(["billing"]);
    // The one call the line above found.
    const march = callsFor(org)[0]!;
    expect(march).toMatchObject({
      organizationId: org,
      notificationId: `alert-${id}-2025-03`,
      permission: "billing:read",
      subject: "Spending alert: your organization passed 20.00 USD in 2025-03",
    });
    expect(march.text).toContain("Month-to-date total: 20.00 USD (as of 2025-03-14 21:20 UTC)");
    expect(march.text).toContain("Alert threshold: 20.00 USD");
    expect(march.text).toContain(id);
    expect(march.text).toContain("GET /v1/billing/usage");
    expect(await notificationRow(march.notificationId)).toMatchObject({ attempts: 1, recipients: RECIPIENTS, last_error: null });

    // The total keeps growing all month; the alert has fired for it.
    for (const at of ["2025-03-20T00:00:00Z", "2025-03-31T23:59:59Z"]) {
      clock.set(at);
      await run();
    }
    expect(callsFor(org)).toHaveLength(1);

    // April starts from zero: below, then through the threshold again.
    clock.set("2025-04-10T00:00:00Z");
    await run();
    expect(callsFor(org)).toHaveLength(1);
    clock.set("2025-04-15T00:00:00Z");
    await run();
    await run();
    const april = callsFor(org).slice(1);
    expect(april.map((c) => [c.notificationId, c.subject])).toEqual([
      [`alert-${id}-2025-04`, "Spending alert: your organization passed 20.00 USD in 2025-04"],
    ]);
    expect(april[0]?.text).toContain("Month-to-date total: 20.16 USD");

    const firings = await env.ctx.pool.query<{ period: string; total: string }>(
      "SELECT to_char(period, 'YYYY-MM') AS period, total FROM alert_firings WHERE alert_id = $1 ORDER BY period",
      [id],
    );
    expect(firings.rows.map((r) => [r.period, Number(r.total)])).toEqual([
      ["2025-03", 20],
      ["2025-04", 20.16],
    ]);
  });

  it("fires each alert the total reaches, one notice each, once even when two checkers race", async () => {
    const org = newOrg();
    const quiet = newOrg();
    clock.set("2025-06-01T00:00:00Z");
    await runSmall(org, "2025-06-01T00:00:00Z");
    const five = await alert(org, 5);
    const ten = await alert(org, 10.5);
    const fifty = await alert(org, 50);
    await alert(quiet, 0.01);

    // 216 h: 12.96 USD.
    clock.set("2025-06-10T00:00:00Z");
    await Promise.all([checkAlerts(ctx), checkAlerts(ctx)]);
    await relayAlertNotifications(ctx, identity);
    const calls = callsFor(org);
    expect(calls.map((c) => c.notificationId).sort()).toEqual([`alert-${five.id}-2025-06`, `alert-${ten.id}-2025-06`].sort());
    expect(calls.map((c) => c.subject).sort()).toEqual([
      "Spending alert: your organization passed 10.50 USD in 2025-06",
      "Spending alert: your organization passed 5.00 USD in 2025-06",
    ]);
    expect(callsFor(quiet)).toEqual([]);
    const fired = await env.ctx.pool.query("SELECT count(*)::int AS n FROM alert_firings WHERE alert_id = ANY($1)", [
      [five.id, ten.id, fifty.id],
    ]);
    expect(fired.rows[0].n).toBe(2);
    expect(log.lines.filter((l) => l.msg === "alert fired" && l.fields.organization_id === org)).toHaveLength(2);
    // The checker that came second found the firings made and added nothing, rather than failing on them.
    expect(log.lines.filter((l) => l.level === "error")).toEqual([]);

    // 50 USD is 833 h 20 min in: reached on the 35th day, i.e. never in June.
    clock.set("2025-06-30T23:59:00Z");
    await run();
    expect(callsFor(org)).toHaveLength(2);
  });
});

describe("relaying alert notices", () => {
  it("retries with backoff until identity accepts, then never sends the notice again", async () => {
    const org = newOrg();
    clock.set("2025-07-01T00:00:00Z");
    await runSmall(org, "2025-07-01T00:00:00Z");
    const { id } = await alert(org, 1);
    const notificationId = `alert-${id}-2025-07`;
    fake.refuse = (req) => (req.organizationId === org ? new ConnectError("identity is having a bad day", Code.Internal) : undefined);

    clock.set("2025-07-02T00:00:00Z");
    await run();
    expect(callsFor(org)).toHaveLength(1);
    const first = await notificationRow(notificationId);
    expect(first).toMatchObject({ attempts: 1, delivered_at: null });
    expect(first.last_error).toContain("identity is having a bad day");
    expect(first.next_attempt_at.toISOString()).toBe("2025-07-02T00:00:10.000Z");
    expect(log.lines.some((l) => l.msg === "alert notice not delivered; will retry" && l.fields.notification_id === notificationId)).toBe(
      true,
    );

    // Not before the backoff has passed.
    await run();
    expect(callsFor(org)).toHaveLength(1);
    clock.set("2025-07-02T00:00:10Z");
    await run();
    expect(callsFor(org)).toHaveLength(2);
    expect((await notificationRow(notificationId)).next_attempt_at.toISOString()).toBe(
      new Date(Date.parse("2025-07-02T00:00:10Z") + retryDelayMs(2)).toISOString(),
    );

    fake.refuse = undefined;
    clock.set("2025-07-02T00:00:29Z");
    await run();
    expect(callsFor(org)).toHaveLength(2);
    clock.set("2025-07-02T00:00:30Z");
    await run();
    const calls = callsFor(org);
    expect(calls).toHaveLength(3);
    // Every attempt carried the same notice.
    expect(new Set(calls.map((c) => JSON.stringify([c.notificationId, c.subject, c.text]))).size).toBe(1);
    expect(await notificationRow(notificationId)).toMatchObject({ attempts: 3, recipients: RECIPIENTS, last_error: null });

    for (const at of ["2025-07-02T01:00:00Z", "2025-07-20T00:00:00Z"]) {
      clock.set(at);
      await run();
    }
    expect(callsFor(org)).toHaveLength(3);
  });

  it("backs off by doubling up to an hour", () => {
    expect([1, 2, 3, 4, 9, 10, 30].map(retryDelayMs)).toEqual([10_000, 20_000, 40_000, 80_000, 2_560_000, 3_600_000, 3_600_000]);
  });

  it("sends a notice fired before a crash, from the restarted process, with the alert's notification id", async () => {
    const org = newOrg();
    clock.set("2025-08-01T00:00:00Z");
    await runSmall(org, "2025-08-01T00:00:00Z");
    const { id } = await alert(org, 2);
    clock.set("2025-08-03T00:00:00Z");

    // The process that fired the alert dies before relaying it.
    const dying = { ...ctx, pool: createPool(env.url, SCHEMA) };
    await checkAlerts(dying);
    await dying.pool.end();
    expect(callsFor(org)).toEqual([]);

    const restarted = { ...ctx, pool: createPool(env.url, SCHEMA) };
    try {
      await run(restarted);
      await run(restarted);
    } finally {
      await restarted.pool.end();
    }
    expect(callsFor(org).map((c) => c.notificationId)).toEqual([`alert-${id}-2025-08`]);
  });

  it("sends the notice again with the same id when the relay dies after identity accepted it, and identity mails it once", async () => {
    const org = newOrg();
    clock.set("2025-09-01T00:00:00Z");
    await runSmall(org, "2025-09-01T00:00:00Z");
    const { id } = await alert(org, 2);
    const notificationId = `alert-${id}-2025-09`;
    clock.set("2025-09-03T00:00:00Z");
    await checkAlerts(ctx);

    // Identity accepts; before its answer is stored, the relaying process loses its database for good.
    const dying = { ...ctx, pool: createPool(env.url, SCHEMA) };
    fake.afterAccept = async (req) => {
      if (req.organizationId !== org) return;
      fake.afterAccept = undefined;
      await dying.pool.end();
    };
    await expect(relayAlertNotifications(dying, identity)).rejects.toThrow(/after calling end/);
    expect(callsFor(org)).toHaveLength(1);
    expect(await notificationRow(notificationId)).toMatchObject({ attempts: 1, delivered_at: null });

    // The restarted relay leaves it alone while the dead one's lease lasts, then sends it again.
    await run();
    expect(callsFor(org)).toHaveLength(1);
    clock.set(new Date(Date.parse("2025-09-03T00:00:00Z") + SEND_LEASE_MS).toISOString());
    await run();
    await run();
    const calls = callsFor(org);
    expect(calls.map((c) => c.notificationId)).toEqual([notificationId, notificationId]);
    expect(calls[1]).toEqual(calls[0]);
    // Identity accepted the id once; the repeat was answered with the first count.
    expect(fake.accepted.get(notificationId)).toBe(RECIPIENTS);
    expect(await notificationRow(notificationId)).toMatchObject({ attempts: 2, recipients: RECIPIENTS });
  });

  it("gives up on a notice for an organization identity does not know", async () => {
    const org = newOrg();
    clock.set("2025-10-01T00:00:00Z");
    await runSmall(org, "2025-10-01T00:00:00Z");
    const { id } = await alert(org, 1);
    fake.refuse = (req) => (req.organizationId === org ? new ConnectError("organization not found", Code.NotFound) : undefined);
    clock.set("2025-10-02T00:00:00Z");
    await run();
    const row = await notificationRow(`alert-${id}-2025-10`);
    expect(row).toMatchObject({ attempts: 1, delivered_at: null });
    expect(row.abandoned_at?.toISOString()).toBe("2025-10-02T00:00:00.000Z");
    clock.set("2025-10-03T00:00:00Z");
    await run();
    expect(callsFor(org)).toHaveLength(1);
  });
});

describe("the alert loop", () => {
  it("checks and relays at once and on every interval until aborted", async () => {
    const org = newOrg();
    clock.set("2025-11-01T00:00:00Z");
    await runSmall(org, "2025-11-01T00:00:00Z");
    const { id } = await alert(org, 20);
    clock.set("2025-11-10T00:00:00Z");
    const stop = new AbortController();
    const loop = startAlerting(ctx, stop.signal, 20);
    try {
      // Several runs at 12.96 USD: below the threshold.
      await sleep(150);
      expect(callsFor(org)).toEqual([]);
      // The loop keeps checking: the total passing the threshold is noticed at a later run.
      clock.set("2025-11-20T00:00:00Z");
      await expect.poll(() => callsFor(org).map((c) => c.notificationId), { timeout: 5_000 }).toEqual([`alert-${id}-2025-11`]);
    } finally {
      stop.abort();
      await loop;
    }
  });

  it("does not run without identity, and says so once", async () => {
    const { identity: _, ...withoutIdentity } = ctx;
    await startAlerting(withoutIdentity, new AbortController().signal, 20);
    expect(log.lines.filter((l) => l.msg.includes("IDENTITY_URL is not set"))).toHaveLength(1);
  });
});
