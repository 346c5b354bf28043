import { Code } from "@connectrpc/connect";
import { newId } from "@dbaas/kit";
import { captureLog } from "@dbaas/test/support/log";
import { startSmtpServer } from "@dbaas/test/support/smtp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMailRelay, createSmtpSender } from "../src/mail.ts";
import { addMember, createHarness, expectError, signupUser, violations, type Harness } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

/** An organization with one member of each role. */
async function team() {
  const owner = await signupUser(h);
  const org = owner.organization!.id;
  const [admin, developer, viewer] = await Promise.all([
    addMember(h, org, "admin"),
    addMember(h, org, "developer"),
    addMember(h, org, "viewer"),
  ]);
  return {
    org,
    name: owner.organization!.name,
    owner: owner.user!.email,
    admin: admin.user.email,
    developer: developer.user.email,
    viewer: viewer.user.email,
  };
}

function notice(org: string, overrides: Partial<{ notificationId: string; permission: string; subject: string; text: string }> = {}) {
  return {
    organizationId: org,
    notificationId: newId("alert"),
    permission: "billing:read",
    subject: `Spending alert ${newId("s")}`,
    text: "Your month-to-date total is 12.34 USD, above your alert at 10.00 USD.\nSee GET /v1/billing/usage.",
    ...overrides,
  };
}

async function queuedTo(subject: string): Promise<string[]> {
  const rows = await h.ctx.pool.query<{ recipient: string }>("SELECT recipient FROM mail_outbox WHERE subject = $1 ORDER BY recipient", [
    subject,
  ]);
  return rows.rows.map((r) => r.recipient);
}

async function recorded(notificationId: string) {
  const rows = await h.ctx.pool.query("SELECT organization_id, recipients FROM notifications WHERE id = $1", [notificationId]);
  return rows.rows;
}

describe("NotifyOrganization", () => {
  it("mails every member whose role holds the permission, and no one else", async () => {
    const t = await team();
    const other = await team();
    const req = notice(t.org);
    expect(await h.client.notifyOrganization(req)).toMatchObject({ recipients: 2 });
    expect(await queuedTo(req.subject)).toEqual([t.owner, t.admin].sort());
    expect(await recorded(req.notificationId)).toEqual([{ organization_id: t.org, recipients: 2 }]);

    await h.ctx.mailRelay.runOnce();
    const sent = h.mail.sent.filter((m) => m.subject === req.subject);
    expect(sent.map((m) => m.to).sort()).toEqual([t.owner, t.admin].sort());
    for (const mail of sent) expect(mail.text).toBe(req.text);
    expect(h.mail.sent.some((m) => [other.owner, other.admin].includes(m.to))).toBe(false);
  });

  it("follows the roles' permissions: billing:write only the owner, databases:write down to developers, databases:read all", async () => {
    const t = await team();
    const cases = [
      { permission: "billing:write", to: [t.owner] },
      { permission: "databases:write", to: [t.owner, t.admin, t.developer] },
      { permission: "databases:read", to: [t.owner, t.admin, t.developer, t.viewer] },
    ];
    for (const c of cases) {
      const req = notice(t.org, { permission: c.permission });
      expect(await h.client.notifyOrganization(req), c.permission).toMatchObject({ recipients: c.to.length });
      expect(await queuedTo(req.subject), c.permission).toEqual([...c.to].sort());
    }
  });

  it("queues nothing for a repeated id and answers the first call's count", async () => {
    const t = await team();
    const req = notice(t.org);
    expect((await h.client.notifyOrganization(req)).recipients).toBe(2);
    await addMember(h, t.org, "admin");
    // A retry, even one whose text changed, is the same notice.
    expect((await h.client.notifyOrganization(req)).recipients).toBe(2);
    expect((await h.client.notifyOrganization({ ...req, text: "changed" })).recipients).toBe(2);
    expect(await queuedTo(req.subject)).toHaveLength(2);
    // A new id reaches the new admin too.
    const next = notice(t.org);
    expect((await h.client.notifyOrganization(next)).recipients).toBe(3);
  });

  it("queues one set of mails when the same id arrives many times at once", async () => {
    const t = await team();
    const req = notice(t.org, { permission: "databases:read" });
    const answers = await Promise.all(Array.from({ length: 8 }, () => h.client.notifyOrganization(req)));
    expect(answers.map((a) => a.recipients)).toEqual(Array(8).fill(4));
    expect(await queuedTo(req.subject)).toEqual([t.owner, t.admin, t.developer, t.viewer].sort());
    expect(await recorded(req.notificationId)).toHaveLength(1);
  });

  it("refuses an id already used for another organization, and queues nothing", async () => {
    const [a, b] = await Promise.all([team(), team()]);
    const req = notice(a.org);
    await h.client.notifyOrganization(req);
    const err = await expectError(
      h.client.notifyOrganization({ ...req, organizationId: b.org, subject: `${req.subject} b` }),
      Code.AlreadyExists,
    );
    expect(err.rawMessage).toBe("notification_id was already used for another organization");
    expect(await queuedTo(`${req.subject} b`)).toEqual([]);
  });

  it("answers NOT_FOUND for an unknown organization and keeps the id unused", async () => {
    const req = notice("org-unknown");
    await expectError(h.client.notifyOrganization(req), Code.NotFound);
    expect(await recorded(req.notificationId)).toEqual([]);
    expect(await queuedTo(req.subject)).toEqual([]);

    const t = await team();
    expect((await h.client.notifyOrganization({ ...req, organizationId: t.org })).recipients).toBe(2);
  });

  it("reports every missing field", async () => {
    const err = await expectError(
      h.client.notifyOrganization({ organizationId: "", notificationId: "", permission: "", subject: " ", text: "\n" }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([
      { field: "organization_id", message: "is required" },
      { field: "notification_id", message: "is required" },
      { field: "permission", message: "is required" },
      { field: "subject", message: "is required" },
      { field: "text", message: "is required" },
    ]);
  });

  it("rejects ids, permissions, subjects and texts out of bounds, and records nothing", async () => {
    const t = await team();
    const bad = [
      { overrides: { notificationId: "x".repeat(201) }, field: "notification_id", message: "must be at most 200 characters" },
      { overrides: { notificationId: "alert-1\n" }, field: "notification_id", message: "must consist of printable characters" },
      { overrides: { notificationId: "alert\u200b-1" }, field: "notification_id", message: "must consist of printable characters" },
      {
        overrides: { permission: "billing:admin" },
        field: "permission",
        message: expect.stringMatching(/^must be one of: databases:read, /),
      },
      {
        overrides: { subject: "Spending alert\r\nBcc: everyone@example.com" },
        field: "subject",
        message: "must be one line without control characters",
      },
      { overrides: { subject: "Spending alert\u2028again" }, field: "subject", message: "must be one line without control characters" },
      { overrides: { subject: "é".repeat(201) }, field: "subject", message: "must be at most 200 characters" },
      { overrides: { text: "x".repeat(10_001) }, field: "text", message: "must be at most 10000 characters" },
    ];
    for (const b of bad) {
      const req = notice(t.org, b.overrides);
      const err = await expectError(h.client.notifyOrganization(req), Code.InvalidArgument);
      expect(violations(err), b.field).toEqual([{ field: b.field, message: b.message }]);
      expect(await recorded(req.notificationId)).toEqual([]);
    }
    expect(await h.ctx.pool.query("SELECT 1 FROM notifications WHERE organization_id = $1", [t.org])).toMatchObject({ rowCount: 0 });

    // The bounds themselves are fine; characters are counted, not UTF-16 units.
    const edge = notice(t.org, { notificationId: `alert-${"é".repeat(194)}`, subject: "€".repeat(200), text: "😀".repeat(10_000) });
    expect((await h.client.notifyOrganization(edge)).recipients).toBe(2);
  });
});

describe("NotifyOrganization through the relay", () => {
  it("delivers each recipient's mail to a real SMTP server", async () => {
    const server = await startSmtpServer();
    const relay = createMailRelay({
      pool: h.ctx.pool,
      clock: h.clock,
      log: captureLog(),
      sender: createSmtpSender(server.url, "dbaas <no-reply@dbaas.test>"),
      sealer: h.ctx.sealer,
      pollMs: 60_000,
    });
    try {
      const t = await team();
      const req = notice(t.org, { subject: `Spending alert: ${t.name} passed 10.00 USD in 2030-01 (${newId("s")})` });
      await h.client.notifyOrganization(req);
      await relay.runOnce();
      for (const to of [t.owner, t.admin]) {
        const mail = await server.waitForMail((m) => m.to.includes(to) && m.subject === req.subject);
        expect(mail.from).toBe("no-reply@dbaas.test");
        expect(mail.text.trimEnd()).toBe(req.text);
      }
      expect(server.mails.filter((m) => m.subject === req.subject)).toHaveLength(2);
      const unsent = await h.ctx.pool.query("SELECT 1 FROM mail_outbox WHERE subject = $1 AND sent_at IS NULL", [req.subject]);
      expect(unsent.rowCount).toBe(0);
    } finally {
      await relay.close();
      await server.stop();
    }
  });
});
