/**
 * One generated request per index, from the operations of the served
 * document: path parameters, query parameters, body properties, content type
 * and credential each plausible or odd. Deterministic for a seed: the same
 * FUZZ_SEED gives the same requests (ids of the fixture aside).
 */
import type { Credential, Fixture } from "./fixture.ts";
import type { Json, Operation } from "./openapi.ts";
import type { Rng } from "./prng.ts";
import { body } from "./bodies.ts";
import { oddBodyText, oddString, oddValue, plausibleValue } from "./values.ts";

export interface FuzzRequest {
  index: number;
  method: string;
  /** Path and query exactly as sent (already percent-encoded where it is). */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  credential: string;
  /** The operation of the document it was made from ("off-document" for the rest). */
  operation: string;
  /** What is odd about it, for the report. */
  what: string[];
  /** The JSON body has a property the operation does not declare: a 2xx would mean it was silently ignored. */
  unknownField?: boolean;
}

/** Credentials that carry the owner's powers: never on requests that would destroy the fixture. */
const OWNER_POWERS = new Set(["owner", "owner-api-key", "two-tokens"]);

/** Percent-encodes any string, lone surrogates included (as UTF-8 of U+FFFD, the way a client would). */
export function encodeSegment(s: string): string {
  let out = "";
  for (const byte of Buffer.from(s, "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Path segments sent as they are: encodings a client could produce, malformed ones included. */
const RAW_IDS = [
  "%00",
  "db-abc%00",
  "%FF",
  "%C0%AE",
  "%ED%A0%80",
  "%",
  "%2",
  "%2F",
  "%2e%2e",
  "..",
  ".",
  "%20",
  "+",
  "~",
  "%E2%80%AE",
  "%EF%BB%BF",
  "null",
  "undefined",
  "0",
  "-1",
  "1e9",
  "__proto__",
  "constructor",
  "prototype",
  "%5B%5D",
  "a;b",
  "a,b",
  "*",
];

/** Where each path's `{id}` may name a real resource without destroying the fixture. */
function realIds(op: Operation, fixture: Fixture): string[] {
  const { ids } = fixture;
  const p = op.path;
  if (p.startsWith("/v1/databases/{")) {
    // Reads, renames, start/stop/restart/resize of the fixture database are harmless; deleting it is not,
    // reset-password waits for the agent (up to 15 s) for nothing, a restore makes a whole new database from the
    // backups, a backup copies the data and a replica is a whole new instance seeded from a backup: they are fuzzed
    // against ids that do not exist.
    if (
      op.method === "DELETE" ||
      p.endsWith("/reset-password") ||
      p.endsWith("/restore") ||
      (op.method === "POST" && (p.endsWith("/backups") || p.endsWith("/replicas")))
    )
      return [];
    return ids.database ? [ids.database] : [];
  }
  // The owner cannot be demoted or removed (409): the one member every request may name.
  if (p.startsWith("/v1/organization/members/{")) return ids.ownerMember ? [ids.ownerMember] : [];
  if (p.startsWith("/v1/organization/api-keys/{")) return ids.spareKey ? [ids.spareKey] : [];
  if (p.startsWith("/v1/organization/invitations/{")) return ids.invitation ? [ids.invitation] : [];
  if (p.startsWith("/v1/billing/alerts/{")) return ids.alert ? [ids.alert] : [];
  return [];
}

function plausibleId(schema: Json | undefined, rng: Rng): string {
  const prefix = typeof schema?.pattern === "string" ? /^\^?([a-z]+)-/.exec(schema.pattern)?.[1] : undefined;
  return `${prefix ?? "id"}-${Array.from({ length: rng.between(8, 24) }, () => "abcdefghijklmnopqrstuvwxyz0123456789"[rng.int(36)]).join("")}`;
}

function pathParam(op: Operation, name: string, schema: Json | undefined, rng: Rng, fixture: Fixture, what: string[]): string {
  const real = realIds(op, fixture);
  const r = rng.next();
  if (r < 0.35 && real.length > 0) return rng.pick(real);
  if (r < 0.55) return plausibleId(schema, rng);
  if (r < 0.75) {
    const id = rng.pick(RAW_IDS);
    what.push(`path ${name} raw "${id}"`);
    return id;
  }
  const base = real.length > 0 && rng.chance(0.5) ? rng.pick(real) : plausibleId(schema, rng);
  const odd = rng.chance(0.3) ? `${base}${rng.pick(["\u0000", "\u202e", "\ud800", " ", "\n", "é", "'", "/x"])}` : oddString(rng, base);
  what.push(`path ${name} odd`);
  return encodeSegment(odd.length > 6000 ? odd.slice(0, rng.pick([300, 6000])) : odd);
}

function queryString(op: Operation, rng: Rng, what: string[]): string {
  const pairs: Array<[string, string]> = [];
  for (const q of op.query) {
    if (q.required || rng.chance(0.4)) pairs.push([q.name, String(plausibleValue(q.schema, rng, q.name))]);
  }
  if (op.query.length > 0 && rng.chance(0.5)) {
    const q = rng.pick(op.query);
    const odd = rng.pick<() => string>([
      () => oddString(rng, "1"),
      () => String(oddValue(q.schema, rng, "1")),
      () => rng.pick(["-1", "0", "1.5", "1e3", "1e309", "0x10", "99999999999999999999", "NaN", " 1", "1 ", "+1", "", "١"]),
    ])();
    what.push(`query ${q.name}=${JSON.stringify(odd.slice(0, 40))}`);
    pairs.push([q.name, odd]);
    if (rng.chance(0.2)) pairs.push([q.name, "2"]);
  }
  let qs = pairs.map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`).join("&");
  if (rng.chance(0.1)) {
    const extra = rng.pick([
      "page[]=1",
      "page[a]=1",
      "per_page[$gt]=1",
      "__proto__[x]=1",
      "constructor[prototype][x]=1",
      "%=1",
      "a=%ZZ",
      "&&&",
      "=",
      "unknown=1",
      `long=${"a".repeat(5000)}`,
    ]);
    what.push(`query extra ${extra.slice(0, 40)}`);
    qs = qs ? `${qs}&${extra}` : extra;
  }
  return qs ? `?${qs}` : "";
}

/** Most requests as the roles that may do the most, so they get past the permission check to the handler. */
const ROLE_WEIGHTS: Record<string, number> = { owner: 35, admin: 25, developer: 15, viewer: 10, "owner-api-key": 15 };

function credential(op: Operation | undefined, rng: Rng, fixture: Fixture): Credential {
  const secured = op?.secured ?? true;
  if (rng.chance(secured ? 0.8 : 0.25)) return rng.weighted(fixture.valid.map((c) => [ROLE_WEIGHTS[c.name] ?? 10, c] as const));
  return rng.pick(fixture.invalid);
}

const OFF_DOCUMENT_PATHS = [
  "/",
  "/v1",
  "/v1/",
  "/v2/databases",
  "/v1/databases/",
  "/V1/DATABASES",
  "/v1//databases",
  "/v1/databases/x/y/z",
  "/v1/nonexistent",
  "/healthz",
  "/docs",
  "/.env",
  "/v1/openapi.json/..",
  "/%2e%2e/etc/passwd",
  "/v1/databases?%",
  "/v1/databases#frag",
  "/v1/%00",
  "/v1/organization/members/",
  "/v1/billing",
  "/v1/./databases",
  "/v1/databases/%2F..%2F..",
  `/v1/${"a".repeat(8000)}`,
];
const ODD_METHODS = ["PUT", "OPTIONS", "HEAD", "PROPFIND", "FOO", "TRACE", "PATCH", "DELETE", "POST", "GET", "MKCOL", "SEARCH"];

export interface Generator {
  /** The request of index `i`: call in order 0, 1, 2, … (the PRNG is sequential). */
  next(index: number): FuzzRequest;
}

export function createGenerator(ops: Operation[], fixture: Fixture, rng: Rng): Generator {
  if (ops.length === 0) throw new Error("the OpenAPI document lists no operations");
  return {
    next(index) {
      const what: string[] = [];
      const headers: Record<string, string> = {};
      const flags: { unknownField?: boolean } = {};
      if (rng.chance(0.04)) {
        // Off the document: unknown paths, methods a path does not have.
        const method = rng.pick(ODD_METHODS);
        const path = rng.chance(0.5) ? rng.pick(OFF_DOCUMENT_PATHS) : rng.pick(ops).path.replace(/\{[^}]+\}/g, "x");
        const cred = credential(undefined, rng, fixture);
        if (cred.authorization !== undefined) headers.authorization = cred.authorization;
        if (method === "DELETE" && OWNER_POWERS.has(cred.name)) delete headers.authorization;
        what.push("off-document");
        return { index, method, path, headers, credential: cred.name, operation: "off-document", what };
      }
      const op = ops[index % ops.length]!;
      let path = op.path;
      for (const param of op.pathParams)
        path = path.replace(`{${param.name}}`, pathParam(op, param.name, param.schema, rng, fixture, what));
      path += queryString(op, rng, what);
      let cred = credential(op, rng, fixture);
      // Deleting the organization with the owner's powers would end the run: those requests go as the viewer.
      if (op.method === "DELETE" && op.path === "/v1/organization" && OWNER_POWERS.has(cred.name))
        cred = fixture.valid.find((c) => c.name === "viewer")!;
      if (cred.authorization !== undefined) headers.authorization = cred.authorization;
      let payload: Buffer | undefined;
      if (op.body || ((op.method === "POST" || op.method === "PUT" || op.method === "PATCH") && rng.chance(0.5))) {
        const { text, contentType, unknownField } = body(op, op.body ?? { type: "object", properties: {} }, rng, fixture, what);
        // Only a body the gateway reads as JSON can be judged for what it ignored.
        if (unknownField && contentType === "application/json" && op.body) flags.unknownField = true;
        payload = typeof text === "string" ? Buffer.from(text, "utf8") : text;
        if (contentType !== undefined) headers["content-type"] = contentType;
      } else if (rng.chance(0.08)) {
        payload = Buffer.from(oddBodyText(rng), "utf8");
        headers["content-type"] = "application/json";
        what.push("body on a method without one");
      }
      if (op.method === "POST" && rng.chance(0.1)) {
        headers["idempotency-key"] = rng
          .pick(["", " ", "k", "a".repeat(300), "a".repeat(5000), "ключ".normalize(), "\u00ff\u00fe", `fuzz-${rng.int(1e9)}`, "0"])
          .replace(/[^\t\x20-\x7e\x80-\xff]/g, "?");
        what.push(`idempotency-key (${headers["idempotency-key"]!.length} chars)`);
      }
      if (rng.chance(0.05)) {
        headers["x-request-id"] = rng.pick([
          "",
          "a".repeat(200),
          "req_<script>",
          "../../x",
          "\u00e9t\u00e9",
          "id with spaces",
          "ok-id_1.2",
        ]);
        what.push("x-request-id odd");
      }
      if (rng.chance(0.03)) {
        headers.accept = rng.pick(["application/xml", "text/html", "*/*;q=0", "application/json;q=0"]);
        what.push(`accept ${headers.accept}`);
      }
      if (payload && rng.chance(0.02)) {
        headers["content-encoding"] = rng.pick(["gzip", "deflate", "br", "identity", "x-unknown"]);
        what.push(`content-encoding ${headers["content-encoding"]} (body not encoded)`);
      }
      return {
        index,
        method: op.method,
        path,
        headers,
        body: payload,
        credential: cred.name,
        operation: `${op.method} ${op.path}`,
        what,
        ...flags,
      };
    },
  };
}
