/**
 * A real SMTP server in its own process, for tests: `node --import tsx
 * test/support/smtp-server.ts [port]`. It prints `listening <port>` once ready
 * and then one JSON line per accepted message: {from, to, raw}. No TLS, no AUTH.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

const port = Number(process.argv[2] ?? 0);

const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ["STARTTLS", "AUTH"],
  logger: false,
  onData(stream, session, callback) {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : "";
      const to = session.envelope.rcptTo.map((r) => r.address);
      process.stdout.write(JSON.stringify({ from, to, raw: Buffer.concat(chunks).toString("utf8") }) + "\n");
      callback();
    });
  },
});

server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`listening ${(server.server.address() as AddressInfo).port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
