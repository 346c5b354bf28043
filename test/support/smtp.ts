import { spawn, type ChildProcess } from "node:child_process";
import { dirname, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export interface ReceivedMail {
  /** Envelope sender and recipients, as the SMTP server saw them. */
  from: string;
  to: string[];
  /** Header names lower-cased, folded lines joined, encoded words decoded. */
  headers: Record<string, string>;
  subject: string;
  /** The body with its transfer encoding undone. */
  text: string;
  raw: string;
}

export interface SmtpServer {
  port: number;
  url: string;
  /** Every message received so far, in order. */
  mails: ReceivedMail[];
  /** Resolves with the first message (received before or after the call) that `match` accepts. */
  waitForMail(match: (mail: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  stop(): Promise<void>;
}

function decodeQuotedPrintable(body: string): string {
  const bytes = body.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return Buffer.from(bytes, "latin1").toString("utf8");
}

function decodeWords(value: string): string {
  return value.replace(/=\?([^?]+)\?([BQ])\?([^?]*)\?=/gi, (_m, _charset: string, enc: string, data: string) =>
    enc.toUpperCase() === "B" ? Buffer.from(data, "base64").toString("utf8") : decodeQuotedPrintable(data.replace(/_/g, " ")),
  );
}

/** Parses a single-part message such as nodemailer sends for a text-only mail. */
export function parseMail(raw: string): Pick<ReceivedMail, "headers" | "subject" | "text"> {
  const split = raw.search(/\r?\n\r?\n/);
  const head = raw.slice(0, split).replace(/\r?\n[ \t]+/g, " ");
  const body = raw.slice(split).replace(/^\r?\n\r?\n/, "");
  const headers: Record<string, string> = {};
  for (const line of head.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = decodeWords(line.slice(i + 1).trim());
  }
  const encoding = (headers["content-transfer-encoding"] ?? "7bit").toLowerCase();
  const text =
    encoding === "quoted-printable"
      ? decodeQuotedPrintable(body)
      : encoding === "base64"
        ? Buffer.from(body.replace(/\s+/g, ""), "base64").toString("utf8")
        : body;
  return { headers, subject: headers.subject ?? "", text: text.replace(/\r\n/g, "\n") };
}

/** The one-time token of the invitation link in a mail's body (the console's join page: `<PUBLIC_BASE_URL>/join?token=…`). */
export function invitationToken(mail: Pick<ReceivedMail, "text">): string {
  const m = /\/join\?token=([A-Za-z0-9_]+)/.exec(mail.text);
  if (!m) throw new Error(`no invitation link in mail:\n${mail.text}`);
  return m[1]!;
}

/**
 * Starts `test/support/smtp-server.ts` as a child process on `port` (0: any
 * free port). Stopping it and starting another on the same port is the SMTP
 * server going away and coming back.
 */
export async function startSmtpServer(port = 0): Promise<SmtpServer> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "test/support/smtp-server.ts", String(port)], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const mails: ReceivedMail[] = [];
  const waiters = new Set<() => void>();
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const listening = await new Promise<number>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`SMTP server not listening after 20 s: ${stderr}`)), 20_000);
    void exited.then(() => fail(new Error(`SMTP server exited: ${stderr}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const m = /^listening (\d+)$/.exec(line);
      if (m) {
        clearTimeout(timer);
        ready(Number(m[1]));
        return;
      }
      if (!line.startsWith("{")) return;
      const { from, to, raw } = JSON.parse(line) as { from: string; to: string[]; raw: string };
      mails.push({ from, to, raw, ...parseMail(raw) });
      for (const wake of waiters) wake();
    });
  });
  return {
    port: listening,
    url: `smtp://127.0.0.1:${listening}`,
    mails,
    async waitForMail(match, timeoutMs = 20_000) {
      const found = () => mails.find(match);
      return await new Promise<ReceivedMail>((resolve, reject) => {
        const check = () => {
          const mail = found();
          if (!mail) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(mail);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching mail within ${timeoutMs} ms; received: ${mails.map((m) => m.subject).join(" | ")}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      await exited;
    },
  };
}
