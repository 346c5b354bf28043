import { invitationToken, startSmtpServer, type SmtpServer } from "@dbaas/test/support/smtp";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "../src/credentials.ts";
import { createLogSender, createMailRelay, createSealer, createSmtpSender, retryDelayMs, type MailRelay } from "../src/mail.ts";
import { actor, createHarness, signupInput, signupUser, type Harness } from "./harness.ts";
import { captureLog } from "@dbaas/test/support/log";

let h: Harness;
const servers: SmtpServer[] = [];
const relays: MailRelay[] = [];

beforeAll(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});
afterAll(async () => {
  await h?.close();
});

async function smtp(port = 0): Promise<SmtpServer> {
  const server = await startSmtpServer(port);
  servers.push(server);
  return server;
}

function relay(url: string, pollMs = 60_000): MailRelay {
  const r = createMailRelay({
    pool: h.ctx.pool,
    clock: h.clock,
    log: captureLog(),
    sender: createSmtpSender(url, "dbaas <no-reply@dbaas.test>"),
    sealer: h.ctx.sealer,
    pollMs,
  });
  relays.push(r);
  return r;
}

async function invite(email = signupInput().email) {
  const owner = await signupUser(h);
  const { invitation } = await h.client.createInvitation({
    organizationId: owner.organization!.id,
    actor: actor(owner.user!.id, "owner"),
    email,
    role: "developer",
  });
  return { email, invitation: invitation!, owner };
}

describe("mail relay over SMTP", () => {
  it("delivers the invitation to a real SMTP server, with a link whose token is the invitation's", async () => {
    const server = await smtp();
    const { email, invitation, owner } = await invite();
    expect(await relay(server.url).runOnce()).toBeGreaterThanOrEqual(1);
    const mail = await server.waitForMail((m) => m.to.includes(email));
    expect(mail.from).toBe("no-reply@dbaas.test");
    expect(mail.subject).toBe(`${owner.user!.name} invited you to ${owner.organization!.name}`);
    const row = await h.ctx.pool.query("SELECT message_id FROM mail_outbox WHERE invitation_id = $1", [invitation.id]);
    expect(mail.headers["message-id"]).toBe(`<${row.rows[0].message_id}>`);
    const token = invitationToken(mail);
    expect(mail.text).toContain(`http://127.0.0.1:8080/join?token=${token}`);
    const stored = await h.ctx.pool.query("SELECT token_hash FROM invitations WHERE id = $1", [invitation.id]);
    expect(stored.rows[0].token_hash).toEqual(hashSecret(token));
  });

  it("keeps a mail while the SMTP server is down and delivers it, once, when it is back", async () => {
    const probe = await smtp();
    const port = probe.port;
    await probe.stop();
    const r = relay(`smtp://127.0.0.1:${port}`);
    const { email, invitation } = await invite();

    expect(await r.runOnce()).toBe(0);
    const failed = await h.ctx.pool.query(
      "SELECT attempts, last_error, next_attempt_at, sent_at FROM mail_outbox WHERE invitation_id = $1",
      [invitation.id],
    );
    expect(failed.rows[0]).toMatchObject({ attempts: 1, sent_at: null });
    expect(failed.rows[0].last_error).toMatch(/ECONNREFUSED/);
    expect(failed.rows[0].next_attempt_at.getTime()).toBe(h.clock.now().getTime() + 1000);

    const server = await smtp(port);
    // Not due yet: backoff is respected.
    expect(await r.runOnce()).toBe(0);
    h.clock.advance(1);
    expect(await r.runOnce()).toBeGreaterThanOrEqual(1);
    await server.waitForMail((m) => m.to.includes(email));
    h.clock.advance(3600);
    await r.runOnce();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(server.mails.filter((m) => m.to.includes(email))).toHaveLength(1);
    const sent = await h.ctx.pool.query("SELECT attempts, last_error, sent_at FROM mail_outbox WHERE invitation_id = $1", [invitation.id]);
    expect(sent.rows[0]).toMatchObject({ attempts: 2, last_error: null });
    expect(sent.rows[0].sent_at).not.toBeNull();
  });

  it("sends each mail once when two replicas' relays run at the same time", async () => {
    const server = await smtp();
    const invited = await Promise.all(Array.from({ length: 6 }, () => invite()));
    await Promise.all([relay(server.url).runOnce(), relay(server.url).runOnce()]);
    for (const { email } of invited) await server.waitForMail((m) => m.to.includes(email));
    const ids = server.mails.map((m) => m.headers["message-id"]);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("runs in the background: a new invitation is mailed without anyone polling", async () => {
    const server = await smtp();
    const background = createMailRelay({
      pool: h.ctx.pool,
      clock: h.clock,
      log: captureLog(),
      sender: createSmtpSender(server.url, "dbaas <no-reply@dbaas.test>"),
      sealer: h.ctx.sealer,
      pollMs: 50,
    });
    relays.push(background);
    background.start();
    const { email } = await invite();
    await server.waitForMail((m) => m.to.includes(email), 10_000);
  });
});

describe("outbox retention", () => {
  it("forgets sent mails after 30 days, never unsent ones", async () => {
    const server = await smtp();
    const sent = await invite();
    const r = relay(server.url);
    await r.runOnce();
    const unsent = await invite();
    h.clock.advance(30 * 24 * 3600 + 1);
    await createMailRelay({
      pool: h.ctx.pool,
      clock: h.clock,
      log: captureLog(),
      sender: { send: () => Promise.reject(new Error("down")), close() {} },
      sealer: h.ctx.sealer,
      pollMs: 60_000,
    }).runOnce();
    const rows = await h.ctx.pool.query("SELECT invitation_id FROM mail_outbox WHERE invitation_id = ANY($1)", [
      [sent.invitation.id, unsent.invitation.id],
    ]);
    expect(rows.rows).toEqual([{ invitation_id: unsent.invitation.id }]);
  });
});

describe("mail without SMTP_URL", () => {
  it("prints recipient, subject and link to the log instead", async () => {
    const log = captureLog();
    await createLogSender(log).send({
      messageId: "m1@dbaas",
      to: "new@example.com",
      subject: "Ada invited you to Acme",
      text: "Accept the invitation: http://127.0.0.1:8080/join?token=dbi_x",
      link: "http://127.0.0.1:8080/join?token=dbi_x",
    });
    expect(log.lines).toEqual([
      {
        level: "info",
        msg: "mail (SMTP_URL unset, printed instead of sent): Ada invited you to Acme",
        fields: {
          to: "new@example.com",
          subject: "Ada invited you to Acme",
          link: "http://127.0.0.1:8080/join?token=dbi_x",
          body: "Accept the invitation: http://127.0.0.1:8080/join?token=dbi_x",
        },
      },
    ]);
  });
});

describe("outbox helpers", () => {
  it("backs off from 1 s, doubling, up to 5 minutes", () => {
    expect([1, 2, 3, 4, 9, 10, 30].map(retryDelayMs)).toEqual([1000, 2000, 4000, 8000, 256_000, 300_000, 300_000]);
  });

  it("seals bodies so that only the same secret opens them, and detects tampering", () => {
    const sealer = createSealer("secret one");
    const sealed = sealer.seal("token dbi_abc");
    expect(sealed.toString("latin1")).not.toContain("dbi_abc");
    expect(sealer.open(sealed)).toBe("token dbi_abc");
    expect(() => createSealer("secret two").open(sealed)).toThrow();
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => sealer.open(tampered)).toThrow();
  });
});
