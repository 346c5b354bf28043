import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

// ajv-formats is CommonJS with an ES-style default export: under NodeNext the default
// import is the module object, whose `default` is the plugin.
const addFormats = addFormatsModule.default;

/** A tiny JSON client for the public API, returning status, headers and parsed body. */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/**
 * Every response this client receives is checked against the OpenAPI
 * document the gateway serves (fetched once per base URL), so a test fails as
 * soon as behaviour and document disagree: an undocumented status, content
 * type, header or field.
 */
export function createApi(baseUrl: string) {
  let token: string | undefined;
  const call = async <T = any>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiResponse<T>> => {
    const res = await fetch(baseUrl + path, {
      method,
      headers: {
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      // Not JSON (a PEM, say): hand back the text.
    }
    const checker = await conformance(baseUrl);
    checker.check({ method, path, status: res.status, headers: res.headers, text, body: parsed });
    return { status: res.status, headers: res.headers, body: parsed as T };
  };
  return {
    call,
    get: <T = any>(path: string, headers?: Record<string, string>) => call<T>("GET", path, undefined, headers),
    post: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) => call<T>("POST", path, body ?? {}, headers),
    put: <T = any>(path: string, body: unknown) => call<T>("PUT", path, body),
    patch: <T = any>(path: string, body: unknown, headers?: Record<string, string>) => call<T>("PATCH", path, body, headers),
    delete: <T = any>(path: string) => call<T>("DELETE", path),
    setToken(t: string | undefined) {
      token = t;
    },
    /**
     * Adds a card (the test processor's token) as the organization's payment method: needed beyond the free
     * allowance (more than 2 micro databases running, a larger tier, a paid plan).
     */
    async addPaymentMethod(paymentToken = "tok_visa") {
      const res = await call("POST", "/v1/billing/payment-methods", { type: "card", token: paymentToken });
      if (res.status !== 201) throw new Error(`adding a payment method failed: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data;
    },
    /** Signs up a fresh organization and uses its token from then on. */
    async signup(prefix = "user") {
      const email = `${prefix}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
      const password = "correct horse battery staple";
      const res = await call("POST", "/v1/auth/signup", { email, password, name: "Test User", organization_name: "Test Org" });
      if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${JSON.stringify(res.body)}`);
      token = res.body.data.access_token;
      return { email, password, ...res.body.data };
    },
  };
}

/**
 * Polls `fn` until it returns a truthy value or `timeoutMs` passes; a throw counts as not yet, and the last one is
 * named on timeout. Paced for an organization's 60 requests a minute (the free plan, counted in fixed minutes):
 * 100 ms before the second poll, 100 ms more each time, at most 1.5 s apart, so about 45 polls in a minute of
 * waiting. Polling every 100 ms used the minute up within six seconds of a slow convergence, and every poll after
 * that was a 429 until the next minute (the CI's "Test timed out" in lifecycle.test.ts). `everyMs` polls at a
 * fixed interval instead: for what the rate limiter does not count (a file, the stack's output, a database
 * connection, another server), where waiting longer than needed only slows the test.
 */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
  what = "condition",
  { everyMs }: { everyMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (let delay = everyMs ?? 100; ; delay = everyMs ?? Math.min(delay + 100, 1500)) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    // No sleep past the deadline: the timeout is reported when it falls, not a pause later.
    if (Date.now() + delay > deadline) break;
    await new Promise((r) => setTimeout(r, delay));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ""}`);
}

/** The database's status; an answer other than 200 (a 429, a 503 while a service restarts) is thrown, naming it. */
export async function statusOf(api: ReturnType<typeof createApi>, id: string): Promise<string> {
  const res = await api.get(`/v1/databases/${id}`);
  if (res.status !== 200) throw new Error(`GET /v1/databases/${id} answered ${res.status}`);
  return res.body.data.status;
}

/**
 * Waits (paced) for database `id` to have `status`; on timeout, says where it stuck: the last status seen, its
 * operations and, given the stack's output (`log`, e.g. `stack.output`), the log lines about it and the
 * services' warnings, which are not printed otherwise.
 */
export async function waitStatus(
  api: ReturnType<typeof createApi>,
  id: string,
  status: string,
  timeoutMs = 60_000,
  log?: () => string,
): Promise<void> {
  let last: string | undefined;
  const reached = async () => {
    last = await statusOf(api, id);
    return last === status;
  };
  try {
    await waitFor(reached, timeoutMs, `${id} ${status}`);
  } catch (err) {
    const ops = await api.get(`/v1/databases/${id}/operations`).catch(() => undefined);
    const opsSeen = (ops?.body?.data?.operations ?? []).map((o: any) => `${o.type}:${o.status}`).join(", ");
    const lines = (log?.() ?? "")
      .split("\n")
      // The gateway's request lines aside: the polls themselves, whose last answer the message names.
      .filter((l) => !/^gateway\s+\| request /.test(l))
      .filter((l) => l.includes(id) || /^(databases|agent-\S+)\s+\| (WARN|ERROR|exited)/.test(l));
    throw new Error(
      `${(err as Error).message} (last status ${last ?? "unknown"}; operations: ${opsSeen || "none"})` +
        (log ? `\nstack log, about it or warnings (last 40 lines):\n${lines.slice(-40).join("\n")}` : ""),
    );
  }
}

/** One response as received, for `ConformanceChecker.check`. */
export interface ReceivedResponse {
  method: string;
  /** Path and query, as requested. */
  path: string;
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON, or the text when it is not JSON. */
  body: unknown;
}

export interface ConformanceChecker {
  /** Throws an error naming the route, the status and what does not match the document. */
  check(res: ReceivedResponse): void;
}

type Json = Record<string, any>;

const checkers = new Map<string, Promise<ConformanceChecker>>();

/** The checker for the document the gateway at `baseUrl` serves, fetched on first use. */
export function conformance(baseUrl: string): Promise<ConformanceChecker> {
  let checker = checkers.get(baseUrl);
  if (!checker) {
    checker = (async () => {
      const res = await fetch(`${baseUrl}/v1/openapi.json`);
      if (res.status !== 200) throw new Error(`GET ${baseUrl}/v1/openapi.json answered ${res.status}: ${await res.text()}`);
      return createConformanceChecker((await res.json()) as Json);
    })();
    checkers.set(baseUrl, checker);
    // A failed fetch (the stack not up yet) is not remembered: the next call tries again.
    checker.catch(() => checkers.delete(baseUrl));
  }
  return checker;
}

/** Statuses the gateway answers on paths or methods the document does not have (docs/product.md, Envelope and errors). */
const UNDOCUMENTED_PATH_STATUSES = [404, 429, 503];
const UNDOCUMENTED_METHOD_STATUSES = [405, 429, 503];
const ALWAYS_REQUIRED_HEADERS = ["x-request-id", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"];

/**
 * Validates responses against an OpenAPI 3.1 document: the status must be
 * documented for the path and method, and so must the content type, the body
 * (JSON Schema 2020-12, formats included) and the headers (required ones
 * present, every documented one well-formed). Requests outside the document
 * (unknown routes, other methods) must get the documented error envelope.
 */
export function createConformanceChecker(doc: Json): ConformanceChecker {
  // Strict, so a schema the document gets wrong (a keyword misspelt, `properties` without
  // `type: object`) fails too; union types are how OpenAPI 3.1 says nullable.
  const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
  addFormats(ajv);
  // The document's own top-level fields, so that it can be registered whole and its
  // schemas referenced by JSON pointer ($refs inside them then resolve as in the document).
  ajv.addVocabulary([
    "openapi",
    "info",
    "jsonSchemaDialect",
    "servers",
    "paths",
    "webhooks",
    "components",
    "security",
    "tags",
    "externalDocs",
  ]);
  ajv.addSchema(doc, "openapi.json");
  // Compiled once per schema location; $refs resolve inside the document.
  const validators = new Map<string, ValidateFunction>();
  const validatorAt = (pointer: string): ValidateFunction => {
    let v = validators.get(pointer);
    if (!v) {
      v = ajv.compile({ $ref: `openapi.json#${pointer}` });
      validators.set(pointer, v);
    }
    return v;
  };
  const resolve = (node: Json): Json => {
    let n = node;
    while (typeof n.$ref === "string") n = pointerGet(doc, n.$ref.slice(1));
    return n;
  };
  const routes = Object.entries(doc.paths as Record<string, Json>).map(([template, item]) => ({
    template,
    item,
    pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}/?$`),
  }));

  return {
    check(res) {
      const path = res.path.split("?")[0]!;
      const method = res.method.toLowerCase();
      const route = routes.find((r) => r.pattern.test(path));
      const fail = (what: string): never => {
        const where = `${res.method} ${route ? route.template : `${path} (not in the document)`} → ${res.status}`;
        throw new Error(`OpenAPI conformance: ${where}: ${what}\nbody: ${res.text.slice(0, 500)}`);
      };
      const operation = route?.item[method] as Json | undefined;
      if (!route || !operation) {
        const allowed = route ? UNDOCUMENTED_METHOD_STATUSES : UNDOCUMENTED_PATH_STATUSES;
        if (!allowed.includes(res.status)) fail(`expected one of ${allowed.join(", ")} for a request outside the document`);
        checkMediaType(res, "application/json", fail);
        checkBody(validatorAt("/components/schemas/Error"), res.body, fail);
        checkHeaders(
          ALWAYS_REQUIRED_HEADERS.map((name) => [name, { required: true, schema: { type: "string" } }]),
          res.headers,
          ajv,
          fail,
        );
        if (res.status === 405 && !res.headers.get("allow")) fail("405 without an Allow header");
        return;
      }
      const key = String(res.status);
      if (!(key in operation.responses)) {
        fail(`status not documented (documented: ${Object.keys(operation.responses).join(", ")})`);
      }
      const raw = operation.responses[key] as Json;
      const response = resolve(raw);
      const responsePointer =
        typeof raw.$ref === "string" ? raw.$ref.slice(1) : `/paths/${escapePointer(route.template)}/${method}/responses/${key}`;

      const headers = Object.entries((response.headers ?? {}) as Record<string, Json>).map(
        ([name, h]) => [name.toLowerCase(), resolve(h)] as [string, Json],
      );
      for (const name of ALWAYS_REQUIRED_HEADERS) {
        if (!headers.some(([n, h]) => n === name && h.required)) fail(`the document does not require the ${name} header`);
      }
      checkHeaders(headers, res.headers, ajv, fail);

      const content = response.content as Record<string, Json> | undefined;
      if (!content) {
        if (res.text !== "") fail("documented without a body, but one was sent");
        return;
      }
      const mediaType = (res.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
      if (!(mediaType in content)) fail(`content type "${mediaType}" not documented (documented: ${Object.keys(content).join(", ")})`);
      if (mediaType === "application/json" && typeof res.body === "string") fail("declared JSON but does not parse");
      checkBody(validatorAt(`${responsePointer}/content/${escapePointer(mediaType)}/schema`), res.body, fail);
    },
  };
}

function checkMediaType(res: ReceivedResponse, expected: string, fail: (what: string) => never): void {
  const mediaType = (res.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (mediaType !== expected) fail(`content type "${mediaType}", expected ${expected}`);
}

function checkBody(validate: ValidateFunction, body: unknown, fail: (what: string) => never): void {
  if (validate(body)) return;
  const errors = (validate.errors ?? []).map(
    (e) => `${e.instancePath || "(body)"} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`,
  );
  fail(`body does not match the schema:\n  ${errors.join("\n  ")}`);
}

/** Header values are strings: an integer schema is checked against the number the string spells. */
function checkHeaders(documented: [string, Json][], actual: Headers, ajv: Ajv2020, fail: (what: string) => never): void {
  for (const [name, spec] of documented) {
    const value = actual.get(name);
    if (value === null) {
      if (spec.required) fail(`required header ${name} missing`);
      continue;
    }
    const schema = spec.schema ?? {};
    const typed = (schema.type === "integer" || schema.type === "number") && /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value;
    if (!ajv.validate(schema, typed)) fail(`header ${name}: "${value}" ${ajv.errorsText()}`);
  }
}

const escapePointer = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

function pointerGet(doc: Json, pointer: string): Json {
  let node: any = doc;
  for (const part of pointer.split("/").slice(1)) node = node?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  if (node === undefined) throw new Error(`OpenAPI document has nothing at #${pointer}`);
  return node;
}
