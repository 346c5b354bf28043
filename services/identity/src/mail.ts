import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import nodemailer from "nodemailer";
import type pg from "pg";
import { randomToken, withClient, type Clock, type Logger } from "@dbaas/kit";
import { claimDueMail, deleteMailSentBefore, insertMail, markMailFailed, markMailSent } from "./db/mail-outbox.ts";
import type { Queryable } from "./db/queryable.ts";

/**
 * Outgoing mail through a transactional outbox: `enqueueMail` writes the mail
 * in the caller's transaction, the relay sends it afterwards and retries with
 * backoff until the SMTP server accepts it. A mail is never lost to an SMTP
 * outage, and one the server accepted is not sent again, except after a crash
 * between the server's OK and our bookkeeping (then the same Message-ID goes
 * out twice and the receiver can tell).
 */
export interface Mail {
  to: string;
  subject: string;
  text: string;
  /** The action the mail is about (e.g. an invitation link); printed when mail is only logged. */
  link?: string;
}

export interface OutgoingMail extends Mail {
  /** RFC 5322 Message-ID without the angle brackets. */
  messageId: string;
}

export interface MailSender {
  send(mail: OutgoingMail): Promise<void>;
  close(): void;
}

/** Sends through the SMTP server at `url` (smtp:// or smtps://, credentials in the URL). */
export function createSmtpSender(url: string, from: string): MailSender {
  const transport = nodemailer.createTransport({
    url,
    // A hung server must not hold an outbox row (and its lock) for long.
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  return {
    async send(mail) {
      await transport.sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text, messageId: `<${mail.messageId}>` });
    },
    close: () => transport.close(),
  };
}

/**
 * Without SMTP_URL (the local stack) mail is printed to the log, so a developer
 * can follow an invitation link. The logger redacts fields named like secrets,
 * so the link travels in `link` and `body`.
 */
export function createLogSender(log: Logger): MailSender {
  return {
    async send(mail) {
      log.info(`mail (SMTP_URL unset, printed instead of sent): ${mail.subject}`, {
        to: mail.to,
        subject: mail.subject,
        link: mail.link,
        body: mail.text,
      });
    },
    close() {},
  };
}

/**
 * Seals mail bodies at rest: they carry one-time tokens that the database
 * otherwise holds only as hashes. The key is derived from the internal secret.
 */
export interface Sealer {
  seal(plain: string): Buffer;
  open(sealed: Buffer): string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

export function createSealer(secret: string): Sealer {
  const key = Buffer.from(hkdfSync("sha256", secret, "dbaas-identity", "mail-outbox-v1", 32));
  return {
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]);
    },
    open(sealed) {
      const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(0, IV_BYTES));
      decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
    },
  };
}

/** Queues `mail` in `db`'s transaction; it goes out only if that transaction commits. */
export async function enqueueMail(db: Queryable, sealer: Sealer, mail: Mail, now: Date, invitationId?: string): Promise<void> {
  await insertMail(db, {
    messageId: `${randomToken(24)}@dbaas`,
    invitationId: invitationId ?? null,
    recipient: mail.to,
    subject: mail.subject,
    sealedBody: sealer.seal(JSON.stringify({ text: mail.text, link: mail.link })),
    now,
  });
}

/** Delay before attempt n+1 after n failures: 1 s doubling, at most 5 minutes. */
export function retryDelayMs(failures: number): number {
  return Math.min(1000 * 2 ** (failures - 1), 300_000);
}

const SENT_RETENTION_MS = 30 * 24 * 3600 * 1000;

export interface MailRelay {
  /** Sends every mail that is due now; returns how many were sent. */
  runOnce(): Promise<number>;
  /** Runs in the background: after every nudge, and every `pollMs` anyway. */
  start(): void;
  /** Something was queued: look now rather than at the next poll. */
  nudge(): void;
  close(): Promise<void>;
}

export interface MailRelayOptions {
  pool: pg.Pool;
  clock: Clock;
  log: Logger;
  sender: MailSender;
  sealer: Sealer;
  pollMs: number;
  /** Mails per run, so one run does not hold a connection for ever. */
  batch?: number;
}

export function createMailRelay(opts: MailRelayOptions): MailRelay {
  const { pool, clock, log, sender, sealer } = opts;
  const batch = opts.batch ?? 50;

  /**
   * One mail per transaction, its row locked while it is being sent: a second
   * replica's relay skips it instead of sending it too, and a crash mid-send
   * unlocks it for the next attempt.
   */
  const sendOne = async (client: pg.PoolClient): Promise<"sent" | "failed" | "none"> => {
    await client.query("BEGIN");
    try {
      const row = await claimDueMail(client, clock.now());
      if (!row) {
        await client.query("COMMIT");
        return "none";
      }
      let outcome: "sent" | "failed";
      try {
        const body = JSON.parse(sealer.open(row.sealed_body)) as { text: string; link?: string };
        await sender.send({ messageId: row.message_id, to: row.recipient, subject: row.subject, ...body });
        await markMailSent(client, row.id, clock.now());
        log.info("mail sent", { mail_id: row.id, to: row.recipient, attempts: row.attempts + 1 });
        outcome = "sent";
      } catch (err) {
        const failures = row.attempts + 1;
        const retryAt = new Date(clock.now().getTime() + retryDelayMs(failures));
        await markMailFailed(client, row.id, { attempts: failures, error: String((err as Error).message ?? err).slice(0, 1000), retryAt });
        log.warn("mail not sent; will retry", { mail_id: row.id, attempts: failures, retry_at: retryAt, error: err });
        outcome = "failed";
      }
      await client.query("COMMIT");
      return outcome;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {});
      throw err;
    }
  };

  // The client is held across SMTP sends: withClient keeps a connection lost meanwhile from crashing the process.
  const runOnce = (): Promise<number> =>
    withClient(pool, async (client) => {
      let sent = 0;
      for (let i = 0; i < batch; i++) {
        const outcome = await sendOne(client);
        if (outcome === "none") break;
        if (outcome === "sent") sent++;
      }
      // Sent mails are kept a while (what went out, when, after how many attempts), not for ever.
      await deleteMailSentBefore(client, new Date(clock.now().getTime() - SENT_RETENTION_MS));
      return sent;
    });

  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;

  const loop = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    if (timer) clearTimeout(timer);
    timer = undefined;
    running = runOnce()
      .then(
        () => undefined,
        (err: unknown) => log.error("mail relay run failed", { error: err }),
      )
      .finally(() => {
        running = undefined;
        if (stopped) return;
        if (again) {
          again = false;
          setImmediate(loop);
        } else {
          timer = setTimeout(loop, opts.pollMs);
        }
      });
  };

  return {
    runOnce,
    start() {
      stopped = false;
      loop();
    },
    nudge() {
      if (!stopped) loop();
    },
    async close() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
      sender.close();
    },
  };
}
