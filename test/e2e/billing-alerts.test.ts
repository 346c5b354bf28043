/**
 * Spending alerts end to end, against the real stack (billing checking alerts
 * every half second, identity mailing through a real SMTP server process):
 * this month's usage is recorded at billing directly, as the databases outbox
 * would have; an alert below the month-to-date total fires once, and every
 * member who may read billing gets one mail, however often billing checks
 * again and however far the total climbs after it. Alerts are listed and
 * removed, and a removed alert never mails anyone.
 */
import type { Client } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createInternalClient, operatorSecret } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { invitationToken, startSmtpServer, type ReceivedMail, type SmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";

const CHECK_INTERVAL_MS = 500;

let meta: TestDatabase;
let smtp: SmtpServer;
let stack: Stack;
let billing: Client<typeof BillingService>;

beforeAll(async () => {
  smtp = await startSmtpServer();
  meta = await createTestDatabase("e2e_alerts");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: { SMTP_URL: smtp.url, ALERT_CHECK_INTERVAL_MS: String(CHECK_INTERVAL_MS) },
  });
  // What a support tool next to the stack does: the secret from the data directory, billing on its port.
  billing = createInternalClient(BillingService, `http://127.0.0.1:${Number(stack.env.PORT) + 3}`, {
    secret: operatorSecret({ ...process.env, DBAAS_DATA_DIR: stack.dataDir }),
    caller: "support",
  });
}, 240_000);

afterAll(async () => {
  await stack?.destroy();
  await smtp?.stop();
  await meta?.drop();
});

const PATH = "/v1/billing/alerts";
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PASSWORD = "correct horse battery staple";

/**
 * The current calendar month (UTC): the alert's period. The usage is put in the six minutes that ended a
 * minute ago, so only a run in the first seven minutes of a month could not hold it.
 */
const now = new Date();
const PERIOD = now.toISOString().slice(0, 7);
const minutesAgo = (m: number) => timestampFromDate(new Date(now.getTime() - m * 60_000));

/**
 * 250 xlarge databases that ran for six minutes: 250 × 0.1 h × 0.48 =
 * 12.00 USD month to date, a figure that does not move while the test runs.
 */
async function recordUsage(organizationId: string): Promise<void> {
  const events = Array.from({ length: 250 }, (_, i) => {
    const databaseId = `db-alr-${organizationId}-${i}`;
    const event = { organizationId, databaseId, tier: "xlarge" };
    return [
      { ...event, eventId: `${databaseId}-up`, status: "running", occurredAt: minutesAgo(7) },
      { ...event, eventId: `${databaseId}-down`, status: "stopped", occurredAt: minutesAgo(1) },
    ];
  }).flat();
  expect((await billing.recordStatusEvents({ events })).recorded).toBe(500);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mailsTo = (email: string): ReceivedMail[] => smtp.mails.filter((m) => m.to.includes(email));

describe("billing alerts, end to end", () => {
  let owner: ReturnType<typeof createApi>;
  let ownerEmail: string;
  let organizationId: string;
  const members: Record<"admin" | "developer", { email: string; api?: ReturnType<typeof createApi> }> = {
    admin: { email: "" },
    developer: { email: "" },
  };

  // Two invitation mails waited for (30 s each): the test's own timeout covers them, so one that sticks names itself.
  it("sets up an organization with an admin and a developer, and 12.00 USD of usage this month", {
    timeout: 2 * 30_000 + 15_000,
  }, async () => {
    owner = createApi(stack.baseUrl);
    ownerEmail = (await owner.signup("alr-owner")).email;
    organizationId = (await owner.get("/v1/organization")).body.data.id;
    for (const role of ["admin", "developer"] as const) {
      const email = `alr-${role}-${Date.now()}@example.com`;
      expect((await owner.post("/v1/organization/members", { email, role })).status).toBe(201);
      const token = invitationToken(await smtp.waitForMail((m) => m.to.includes(email), 30_000));
      const accepted = await createApi(stack.baseUrl).post("/v1/invitations/accept", { token, name: role, password: PASSWORD });
      expect(accepted.status).toBe(201);
      members[role].email = email;
      members[role].api = createApi(stack.baseUrl);
      members[role].api!.setToken(accepted.body.data.access_token);
    }
    await recordUsage(organizationId);
    const usage = await owner.get("/v1/billing/usage");
    expect(usage.status).toBe(200);
    expect(usage.body.data).toMatchObject({ total: 12, currency: "USD" });
  });

  it("an alert below the month-to-date total answers 201 and mails every member who may read billing, once", async () => {
    const res = await owner.post(PATH, { threshold: 10, currency: "USD", channels: ["email"] });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^alr-/),
      threshold: 10,
      currency: "USD",
      channels: ["email"],
      created_at: expect.stringMatching(ISO),
    });
    // An alert the total has not reached: it must not fire.
    expect((await owner.post(PATH, { threshold: 1000, currency: "USD", channels: ["email"] })).status).toBe(201);

    // Within a few seconds: billing checks every half second, then its outbox and identity's mail outbox relay it.
    const mail = await smtp.waitForMail((m) => m.to.includes(ownerEmail) && m.subject.startsWith("Spending alert"), 10_000);
    // Billing knows the organization by id only, so the subject does not name it.
    expect(mail.subject).toBe(`Spending alert: your organization passed 10.00 USD in ${PERIOD}`);
    expect(mail.text).toContain("12.00 USD");
    expect(mail.text).toContain("10.00 USD");
    expect(mail.text).toContain("/v1/billing/usage");
    // The admin holds billing:read too; the developer does not.
    const toAdmin = await smtp.waitForMail((m) => m.to.includes(members.admin.email) && m.subject === mail.subject, 10_000);
    expect(toAdmin.text).toBe(mail.text);
  });

  it("billing checking again, and the total climbing further, sends no second mail", async () => {
    // One more xlarge database, still running: the month-to-date total keeps rising past 12.00.
    const databaseId = `db-alr-${organizationId}-more`;
    await billing.recordStatusEvents({
      events: [{ eventId: `${databaseId}-up`, organizationId, databaseId, tier: "xlarge", status: "running", occurredAt: minutesAgo(1) }],
    });
    await sleep(10 * CHECK_INTERVAL_MS);
    expect((await owner.get("/v1/billing/usage")).body.data.total).toBeGreaterThan(12);
    const alerts = (email: string) => mailsTo(email).filter((m) => m.subject.startsWith("Spending alert"));
    expect(alerts(ownerEmail)).toHaveLength(1);
    expect(alerts(members.admin.email)).toHaveLength(1);
    expect(alerts(members.developer.email)).toEqual([]);
  });

  it("lists the organization's alerts, oldest first, with list meta; billing:read may list, not remove", async () => {
    const res = await owner.get(PATH);
    expect(res.status).toBe(200);
    expect(res.body.data.alerts.map((a: { threshold: number }) => a.threshold)).toEqual([10, 1000]);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 2, total_pages: 1 });
    const byAdmin = await members.admin.api!.get(PATH);
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body.data).toEqual(res.body.data);
    expect((await members.developer.api!.get(PATH)).status).toBe(403);
    const removing = await members.admin.api!.delete(`${PATH}/${res.body.data.alerts[1].id}`);
    expect(removing.status).toBe(403);
    expect(removing.body.error.message).toBe("this action requires the billing:write permission");
  });

  it("DELETE removes an alert (204); again, or from another organization, is 404", async () => {
    const [fired, pending] = (await owner.get(PATH)).body.data.alerts as [{ id: string }, { id: string }];
    const stranger = createApi(stack.baseUrl);
    await stranger.signup("alr-stranger");
    expect((await stranger.delete(`${PATH}/${pending.id}`)).status).toBe(404);
    expect((await owner.delete(`${PATH}/${pending.id}`)).status).toBe(204);
    expect((await owner.delete(`${PATH}/${pending.id}`)).status).toBe(404);
    expect((await owner.get(PATH)).body.data.alerts.map((a: { id: string }) => a.id)).toEqual([fired.id]);
  });

  it("a removed alert never fires; the one kept beside it does", async () => {
    const other = createApi(stack.baseUrl);
    const email = (await other.signup("alr-remover")).email;
    const org = (await other.get("/v1/organization")).body.data.id as string;
    const removed = (await other.post(PATH, { threshold: 5, currency: "USD", channels: ["email"] })).body.data.id as string;
    const kept = (await other.post(PATH, { threshold: 6, currency: "USD", channels: ["email"] })).body.data.id as string;
    expect((await other.delete(`${PATH}/${removed}`)).status).toBe(204);
    await recordUsage(org);

    const mail = await smtp.waitForMail((m) => m.to.includes(email) && m.subject.startsWith("Spending alert"), 10_000);
    expect(mail.text).toContain(kept);
    await sleep(10 * CHECK_INTERVAL_MS);
    const alerts = mailsTo(email).filter((m) => m.subject.startsWith("Spending alert"));
    expect(alerts).toHaveLength(1);
    expect(alerts.some((m) => m.text.includes(removed))).toBe(false);
  });
});
