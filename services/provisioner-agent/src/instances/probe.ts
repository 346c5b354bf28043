import net from "node:net";
import tls from "node:tls";

export interface TlsLoginProbe {
  host: string;
  port: number;
  /** CA that must have signed the server certificate. */
  caPem: string;
  /** Name the certificate must cover. */
  hostname: string;
  user: string;
  database: string;
  timeoutMs?: number;
}

const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const AUTH_SASL = 10;

function startupMessage(user: string, database: string): Buffer {
  const body = Buffer.from(`user\0${user}\0database\0${database}\0application_name\0dbaas-agent-probe\0\0`, "utf8");
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + body.length, 0);
  head.writeInt32BE(196608, 4); // protocol 3.0
  return Buffer.concat([head, body]);
}

function errorText(payload: Buffer): string {
  const fields: Record<string, string> = {};
  for (let i = 0; i < payload.length && payload[i] !== 0; ) {
    const code = String.fromCharCode(payload[i]!);
    const end = payload.indexOf(0, i + 1);
    if (end < 0) break;
    fields[code] = payload.subarray(i + 1, end).toString("utf8");
    i = end + 1;
  }
  return fields.M ?? "unknown server error";
}

/**
 * Proves an instance is reachable the way customers will reach it, without
 * knowing any password: TCP connect, SSLRequest, TLS handshake verified
 * against the agent CA and `hostname`, then a startup packet for `user`. The
 * server answering with a SCRAM (SASL) challenge shows the open pg_hba rules
 * are loaded. We then hang up; PostgreSQL logs nothing for a client that
 * leaves during authentication.
 */
export function probeTlsLogin(p: TlsLoginProbe): Promise<void> {
  const timeoutMs = p.timeoutMs ?? 3000;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    let tlsSock: tls.TLSSocket | undefined;
    const raw = net.connect({ host: p.host, port: p.port });
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!err && tlsSock) {
        // Hang up politely (close_notify + FIN): destroying a socket with
        // unread TLS session tickets sends a RST, which the server logs.
        const s = tlsSock;
        s.on("close", () => raw.destroy());
        s.end();
        setTimeout(() => s.destroy(), 1000).unref();
      } else {
        tlsSock?.destroy();
        raw.destroy();
      }
      if (err) reject(err);
      else resolve();
    };
    const timer = setTimeout(() => finish(new Error(`TLS probe of ${p.host}:${p.port} timed out after ${timeoutMs} ms`)), timeoutMs);
    raw.on("error", (e) => finish(e));
    raw.once("connect", () => raw.write(SSL_REQUEST));
    raw.once("data", (b: Buffer) => {
      if (b[0] !== 0x53 /* 'S' */) {
        finish(new Error(`server at ${p.host}:${p.port} refused TLS (answered ${JSON.stringify(String.fromCharCode(b[0] ?? 0))})`));
        return;
      }
      raw.pause();
      const isIpName = net.isIP(p.hostname) !== 0;
      tlsSock = tls.connect({
        socket: raw,
        ca: p.caPem,
        ...(isIpName ? {} : { servername: p.hostname }),
        checkServerIdentity: (_host, cert) => tls.checkServerIdentity(p.hostname, cert),
      });
      tlsSock.on("error", (e) => finish(e));
      let buf = Buffer.alloc(0);
      tlsSock.once("secureConnect", () => tlsSock!.write(startupMessage(p.user, p.database)));
      tlsSock.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        if (buf.length < 5) return;
        const type = String.fromCharCode(buf[0]!);
        const len = buf.readInt32BE(1);
        if (buf.length < 1 + len) return;
        const payload = buf.subarray(5, 1 + len);
        if (type === "R" && payload.length >= 4 && payload.readInt32BE(0) === AUTH_SASL) finish();
        else if (type === "E") finish(new Error(`server rejected login probe: ${errorText(payload)}`));
        else finish(new Error(`unexpected server message ${JSON.stringify(type)} during login probe`));
      });
    });
  });
}

/** Resolves true if nothing accepts TCP connections on host:port. */
export function tcpPortRefuses(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (refused: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve(refused);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    s.once("connect", () => done(false));
    s.once("error", (e: NodeJS.ErrnoException) => done(e.code === "ECONNREFUSED"));
  });
}
