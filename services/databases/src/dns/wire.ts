import { createHmac, randomInt, timingSafeEqual } from "node:crypto";
import net from "node:net";

/*
 * The DNS messages the rfc2136 adapter sends, encoded here rather than with a
 * library (none of npm's well-kept DNS codecs signs with TSIG): an UPDATE
 * (RFC 2136) that replaces or deletes a name's A and AAAA RRsets, and a QUERY
 * for them, each signed with TSIG (RFC 8945, hmac-sha256) and the server's
 * signed answer verified. Names are written uncompressed; answers are read
 * with compression pointers followed.
 */

const TYPE = { A: 1, SOA: 6, AAAA: 28, TSIG: 250, ANY: 255 } as const;
const CLASS = { IN: 1, ANY: 255 } as const;
const OPCODE = { QUERY: 0, UPDATE: 5 } as const;
const FUDGE_SECONDS = 300;

const RCODES: Record<number, string> = {
  0: "NOERROR",
  1: "FORMERR",
  2: "SERVFAIL",
  3: "NXDOMAIN",
  4: "NOTIMP",
  5: "REFUSED",
  6: "YXDOMAIN",
  7: "YXRRSET",
  8: "NXRRSET",
  9: "NOTAUTH",
  10: "NOTZONE",
};
const TSIG_ERRORS: Record<number, string> = {
  16: "BADSIG (the key's secret does not match the server's)",
  17: "BADKEY (the server does not know this key name or algorithm)",
  18: "BADTIME (the clocks differ by more than the fudge)",
  22: "BADTRUNC",
};

/** A TSIG key as DNS_TSIG_KEY gives it: `hmac-sha256:<name>:<base64 secret>`. */
export interface TsigKey {
  name: string;
  secret: Buffer;
}

/** One A or AAAA record of an answer. */
export interface AddressRecord {
  address: string;
  ttl: number;
}

/** A refusal or failure the server reported: its RCODE and, for a TSIG failure, the TSIG error. */
export class DnsError extends Error {
  constructor(
    message: string,
    readonly rcode: number,
    readonly tsigError = 0,
  ) {
    super(message);
  }
}

const ALGORITHM = "hmac-sha256";

/** Parses DNS_TSIG_KEY; throws naming what is wrong (never the secret). */
export function parseTsigKey(raw: string): TsigKey {
  const parts = raw.split(":");
  if (parts.length !== 3) throw new Error("DNS_TSIG_KEY must look like hmac-sha256:<key name>:<base64 secret>");
  const [algorithm, name, secret] = parts as [string, string, string];
  if (algorithm.toLowerCase() !== ALGORITHM) throw new Error(`DNS_TSIG_KEY: only hmac-sha256 is supported, got "${algorithm}"`);
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error("DNS_TSIG_KEY: the key name must be a domain name");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(secret)) throw new Error("DNS_TSIG_KEY: the secret must be base64");
  const bytes = Buffer.from(secret, "base64");
  if (bytes.length < 16) throw new Error("DNS_TSIG_KEY: the secret is shorter than 16 bytes");
  return { name: name.replace(/\.$/, "").toLowerCase(), secret: bytes };
}

/** A domain name in wire form, uncompressed and lowercased (the canonical form TSIG signs). */
export function encodeName(name: string): Buffer {
  const labels = name.replace(/\.$/, "").split(".").filter(Boolean);
  const parts: Buffer[] = [];
  for (const label of labels) {
    const b = Buffer.from(label.toLowerCase(), "ascii");
    if (b.length > 63) throw new Error(`DNS label "${label}" is longer than 63 bytes`);
    parts.push(Buffer.from([b.length]), b);
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function u48(n: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUIntBE(n, 0, 6);
  return b;
}

function header(id: number, opcode: number, counts: [number, number, number, number]): Buffer {
  return Buffer.concat([u16(id), u16(opcode << 11), ...counts.map(u16)]);
}

function rr(name: string, type: number, klass: number, ttl: number, rdata: Buffer): Buffer {
  return Buffer.concat([encodeName(name), u16(type), u16(klass), u32(ttl), u16(rdata.length), rdata]);
}

function addressRdata(address: string): { type: number; rdata: Buffer } {
  if (net.isIPv4(address)) return { type: TYPE.A, rdata: Buffer.from(address.split(".").map(Number)) };
  if (net.isIPv6(address)) return { type: TYPE.AAAA, rdata: ipv6Bytes(address) };
  throw new Error(`"${address}" is not an IP address`);
}

function ipv6Bytes(address: string): Buffer {
  let text = address;
  // An embedded IPv4 tail (::ffff:1.2.3.4) as two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4[1]!.split(".").map(Number) as [number, number, number, number];
    text = `${text.slice(0, -v4[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
  const out = Buffer.alloc(16);
  for (const [i, g] of groups.entries()) out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  return out;
}

function ipv6Text(b: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i).toString(16));
  // The shortest form, as net.isIPv6 and the tests compare (longest run of zeros as ::).
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== "0") {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(":");
  return `${groups.slice(0, best.at).join(":")}::${groups.slice(best.at + best.len).join(":")}`;
}

/** The TSIG variables (RFC 8945 4.3.3) after the key name, class and TTL, which every MAC covers. */
function tsigVariables(key: TsigKey, timeSigned: number, error: number, other: Buffer): Buffer {
  return Buffer.concat([
    encodeName(key.name),
    u16(CLASS.ANY),
    u32(0),
    encodeName(ALGORITHM),
    u48(timeSigned),
    u16(FUDGE_SECONDS),
    u16(error),
    u16(other.length),
    other,
  ]);
}

function hmac(key: TsigKey, ...parts: Buffer[]): Buffer {
  const h = createHmac("sha256", key.secret);
  for (const p of parts) h.update(p);
  return h.digest();
}

/** A message signed: the TSIG record appended (ARCOUNT + 1); answers the request MAC, which the response's MAC covers. */
function sign(message: Buffer, id: number, key: TsigKey, now: Date): { wire: Buffer; mac: Buffer } {
  const timeSigned = Math.floor(now.getTime() / 1000);
  const mac = hmac(key, message, tsigVariables(key, timeSigned, 0, Buffer.alloc(0)));
  const rdata = Buffer.concat([encodeName(ALGORITHM), u48(timeSigned), u16(FUDGE_SECONDS), u16(mac.length), mac, u16(id), u16(0), u16(0)]);
  const signed = Buffer.concat([message, rr(key.name, TYPE.TSIG, CLASS.ANY, 0, rdata)]);
  signed.writeUInt16BE(message.readUInt16BE(10) + 1, 10);
  return { wire: signed, mac };
}

/** An UPDATE of `zone` that makes `name`'s A and AAAA RRsets exactly `addresses` (none: both deleted), with `ttl`. */
export function updateMessage(id: number, zone: string, name: string, addresses: string[], ttl: number): Buffer {
  const updates = [rr(name, TYPE.A, CLASS.ANY, 0, Buffer.alloc(0)), rr(name, TYPE.AAAA, CLASS.ANY, 0, Buffer.alloc(0))];
  for (const a of addresses) {
    const { type, rdata } = addressRdata(a);
    updates.push(rr(name, type, CLASS.IN, ttl, rdata));
  }
  const zoneSection = Buffer.concat([encodeName(zone), u16(TYPE.SOA), u16(CLASS.IN)]);
  return Buffer.concat([header(id, OPCODE.UPDATE, [1, 0, updates.length, 0]), zoneSection, ...updates]);
}

/** A QUERY for `name`'s records of `type` (A or AAAA), recursion not asked for. */
export function queryMessage(id: number, name: string, type: "A" | "AAAA"): Buffer {
  return Buffer.concat([header(id, OPCODE.QUERY, [1, 0, 0, 0]), encodeName(name), u16(TYPE[type]), u16(CLASS.IN)]);
}

interface ParsedRR {
  name: string;
  type: number;
  klass: number;
  ttl: number;
  rdata: Buffer;
  /** Offset of the record's first byte in the message. */
  start: number;
}

function readName(msg: Buffer, offset: number): { name: string; next: number } {
  const labels: string[] = [];
  let pos = offset;
  let next = -1;
  for (let jumps = 0; jumps < 64; ) {
    const len = msg[pos];
    if (len === undefined) throw new Error("truncated name in the DNS answer");
    if (len === 0) {
      if (next < 0) next = pos + 1;
      return { name: labels.join("."), next };
    }
    if ((len & 0xc0) === 0xc0) {
      if (next < 0) next = pos + 2;
      pos = msg.readUInt16BE(pos) & 0x3fff;
      jumps++;
      continue;
    }
    labels.push(msg.subarray(pos + 1, pos + 1 + len).toString("ascii"));
    pos += 1 + len;
  }
  throw new Error("a name in the DNS answer loops");
}

function parse(msg: Buffer): { id: number; rcode: number; sections: ParsedRR[][] } {
  if (msg.length < 12) throw new Error("DNS answer shorter than its header");
  const counts = [4, 6, 8, 10].map((o) => msg.readUInt16BE(o));
  let pos = 12;
  for (let i = 0; i < counts[0]!; i++) pos = readName(msg, pos).next + 4;
  const sections: ParsedRR[][] = [];
  for (const count of counts.slice(1)) {
    const list: ParsedRR[] = [];
    for (let i = 0; i < count; i++) {
      const start = pos;
      const { name, next } = readName(msg, pos);
      const type = msg.readUInt16BE(next);
      const klass = msg.readUInt16BE(next + 2);
      const ttl = msg.readUInt32BE(next + 4);
      const len = msg.readUInt16BE(next + 8);
      list.push({ name, type, klass, ttl, rdata: msg.subarray(next + 10, next + 10 + len), start });
      pos = next + 10 + len;
    }
    sections.push(list);
  }
  return { id: msg.readUInt16BE(0), rcode: msg.readUInt16BE(2) & 0xf, sections };
}

/**
 * Checks the response's TSIG (RFC 8945 5.3): present, by our key, and its MAC
 * over the request MAC, the response without its TSIG record (original id,
 * ARCOUNT − 1) and its TSIG variables. Throws a DnsError naming a TSIG error
 * the server reported (a wrong key: BADSIG or BADKEY, answered unsigned).
 */
function verify(response: Buffer, parsed: ReturnType<typeof parse>, requestMac: Buffer, key: TsigKey, now: Date): void {
  const additional = parsed.sections[2]!;
  const tsig = additional[additional.length - 1];
  if (!tsig || tsig.type !== TYPE.TSIG) {
    throw new DnsError(`the DNS server answered ${RCODES[parsed.rcode] ?? parsed.rcode} without a TSIG signature`, parsed.rcode);
  }
  const r = tsig.rdata;
  const alg = readName(r, 0);
  let p = alg.next;
  const timeSigned = r.readUIntBE(p, 6);
  const fudge = r.readUInt16BE(p + 6);
  const macLen = r.readUInt16BE(p + 8);
  const mac = r.subarray(p + 10, p + 10 + macLen);
  p += 10 + macLen;
  const originalId = r.readUInt16BE(p);
  const error = r.readUInt16BE(p + 2);
  const otherLen = r.readUInt16BE(p + 4);
  const other = r.subarray(p + 6, p + 6 + otherLen);
  if (error !== 0) {
    throw new DnsError(
      `the DNS server refused our TSIG key "${key.name}": ${TSIG_ERRORS[error] ?? `TSIG error ${error}`} (${RCODES[parsed.rcode] ?? parsed.rcode})`,
      parsed.rcode,
      error,
    );
  }
  if (tsig.name.toLowerCase() !== key.name || alg.name.toLowerCase() !== ALGORITHM) {
    throw new DnsError(`the DNS answer is signed by another key (${tsig.name}, ${alg.name})`, parsed.rcode);
  }
  const unsigned = Buffer.from(response.subarray(0, tsig.start));
  unsigned.writeUInt16BE(originalId, 0);
  unsigned.writeUInt16BE(unsigned.readUInt16BE(10) - 1, 10);
  const expected = hmac(key, u16(requestMac.length), requestMac, unsigned, tsigVariables(key, timeSigned, error, other));
  if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) {
    throw new DnsError("the DNS answer's TSIG signature does not verify", parsed.rcode);
  }
  if (Math.abs(now.getTime() / 1000 - timeSigned) > fudge)
    throw new DnsError("the DNS answer was signed outside the fudge window", parsed.rcode);
}

/** Where the server is: DNS_SERVER as `host:port` (`[v6]:port`). */
export interface Server {
  host: string;
  port: number;
}

export function parseServer(raw: string): Server {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(raw) ?? /^([^:]+):(\d+)$/.exec(raw);
  const port = Number(m?.[2]);
  if (!m || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`DNS_SERVER must look like 127.0.0.1:5353, got "${raw}"`);
  return { host: m[1]!, port };
}

/**
 * Sends one message over TCP (RFC 7766: every server takes UPDATE and QUERY on
 * TCP; a refused or silent server fails fast instead of waiting out UDP
 * retries) and answers the response's bytes.
 */
function exchange(server: Server, wire: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: server.host, port: server.port });
    let buf = Buffer.alloc(0);
    const fail = (why: string) => {
      socket.destroy();
      reject(new Error(`DNS server ${server.host}:${server.port}: ${why}`));
    };
    socket.setTimeout(timeoutMs, () => fail(`no answer within ${timeoutMs} ms`));
    socket.on("error", (e: NodeJS.ErrnoException) => fail(e.code === "ECONNREFUSED" ? "connection refused" : e.message));
    socket.on("connect", () => socket.write(Buffer.concat([u16(wire.length), wire])));
    socket.on("data", (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        socket.end();
        resolve(buf.subarray(2, 2 + buf.readUInt16BE(0)));
      }
    });
    socket.on("end", () => fail("closed the connection without an answer"));
  });
}

/** A client of one authoritative server, every message signed with `key`. */
export interface Rfc2136Client {
  /** Replaces `name`'s A/AAAA records by `addresses` (empty: deletes them). Throws a DnsError on a refusal. */
  update(zone: string, name: string, addresses: string[], ttl: number): Promise<void>;
  /** The server's A and AAAA records of `name` (empty for NXDOMAIN or no such records). */
  lookup(name: string): Promise<AddressRecord[]>;
}

export function rfc2136Client(server: Server, key: TsigKey, timeoutMs: number, now: () => Date = () => new Date()): Rfc2136Client {
  async function send(message: Buffer): Promise<ReturnType<typeof parse>> {
    const id = message.readUInt16BE(0);
    const { wire, mac } = sign(message, id, key, now());
    const response = await exchange(server, wire, timeoutMs);
    const parsed = parse(response);
    if (parsed.id !== id) throw new Error(`DNS server ${server.host}:${server.port} answered another message (id ${parsed.id})`);
    verify(response, parsed, mac, key, now());
    return parsed;
  }
  return {
    async update(zone, name, addresses, ttl) {
      const r = await send(updateMessage(randomInt(0, 0x10000), zone, name, addresses, ttl));
      if (r.rcode !== 0) throw new DnsError(`the DNS server refused the update of ${name}: ${RCODES[r.rcode] ?? r.rcode}`, r.rcode);
    },
    async lookup(name) {
      const records: AddressRecord[] = [];
      for (const type of ["A", "AAAA"] as const) {
        const r = await send(queryMessage(randomInt(0, 0x10000), name, type));
        if (r.rcode === 3) return [];
        if (r.rcode !== 0) throw new DnsError(`the DNS server answered ${RCODES[r.rcode] ?? r.rcode} for ${name} ${type}`, r.rcode);
        for (const a of r.sections[0]!) {
          if (a.type === TYPE.A && a.rdata.length === 4) records.push({ address: [...a.rdata].join("."), ttl: a.ttl });
          if (a.type === TYPE.AAAA && a.rdata.length === 16) records.push({ address: ipv6Text(a.rdata), ttl: a.ttl });
        }
      }
      return records;
    },
  };
}
