import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { DbaasConnectionError, DbaasError } from "./errors.ts";

/** The default API address: a local stack (`npm start`). */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

export interface ClientOptions {
  /** The API's address; default `DBAAS_URL`, else http://127.0.0.1:8080. */
  baseUrl?: string | undefined;
  /** A login token (`dbs_…`) or an API key (`dbk_…`), both sent as `Authorization: Bearer`; default `DBAAS_TOKEN`. */
  token?: string | undefined;
  /** How many times a 429 or 503 answer (after its Retry-After) or an unanswered GET or POST is retried; default 3, 0 turns retries off. */
  maxRetries?: number;
  /** The longest Retry-After honoured: a longer one is thrown at once (as `DbaasError.retryAfter`); default 60 s. */
  maxRetryWaitMs?: number;
  /** Per attempt; default 30 s. */
  timeoutMs?: number;
  /** Sent as User-Agent. */
  userAgent?: string;
  /** How the client waits before a retry (default: a timer); e.g. to log or record the waits. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface RequestOptions {
  /** Sent as Idempotency-Key on a POST instead of a new random one (the same for all of this call's retries). */
  idempotencyKey?: string;
  /** Sent as X-Request-Id. */
  requestId?: string;
  signal?: AbortSignal;
}

/** The X-RateLimit-* headers: the window closest to exhaustion. */
export interface RateLimit {
  limit: number;
  remaining: number;
  /** When the window resets, Unix time in seconds. */
  reset: number;
}

/** What the last response (success or error) said besides its body. */
export interface ResponseInfo {
  status: number;
  requestId: string | undefined;
  rateLimit: RateLimit | undefined;
  /** True when the API replayed the stored answer of an earlier request with the same Idempotency-Key. */
  replayed: boolean;
  headers: Headers;
}

export interface Call extends RequestOptions {
  query?: Record<string, string | number | boolean | undefined> | undefined;
  body?: unknown;
}

/** A successful answer: the JSON envelope (or a file's bytes/text, or nothing for 204). */
export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON, typed by each method from the generated schemas.
  json: any;
  bytes: Uint8Array | undefined;
}

const RETRIED = new Set([429, 503]);

function numberHeader(headers: Headers, name: string): number | undefined {
  const v = headers.get(name);
  if (v === null || v.trim() === "") return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** Retry-After in seconds: delta-seconds, or an HTTP date (RFC 9110) counted from now. */
function retryAfterOf(headers: Headers): number | undefined {
  const v = headers.get("retry-after")?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  const when = Date.parse(v);
  return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
}

function rateLimitOf(headers: Headers): RateLimit | undefined {
  const limit = numberHeader(headers, "x-ratelimit-limit");
  const remaining = numberHeader(headers, "x-ratelimit-remaining");
  const reset = numberHeader(headers, "x-ratelimit-reset");
  return limit === undefined || remaining === undefined || reset === undefined ? undefined : { limit, remaining, reset };
}

/**
 * Sends requests: bearer credential, JSON in and out, an Idempotency-Key on
 * every POST (kept across its retries, so a retried create never creates
 * twice), retries of 429 and 503 after their Retry-After (bounded) and of a
 * GET or POST that got no answer, error envelopes turned into `DbaasError`.
 */
export class Transport {
  readonly baseUrl: string;
  token: string | undefined;
  lastResponse: ResponseInfo | undefined;
  readonly #maxRetries: number;
  readonly #maxRetryWaitMs: number;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(opts: ClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? process.env.DBAAS_URL ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.token = opts.token ?? process.env.DBAAS_TOKEN;
    this.#maxRetries = opts.maxRetries ?? 3;
    this.#maxRetryWaitMs = opts.maxRetryWaitMs ?? 60_000;
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#userAgent = opts.userAgent ?? "dbaas-node/0.1.0";
    this.#sleep = opts.sleep ?? ((ms, signal) => sleep(ms, undefined, { signal }));
  }

  async request(method: string, path: string, call: Call = {}): Promise<Answer> {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(call.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: "application/json", "user-agent": this.#userAgent };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (call.requestId) headers["x-request-id"] = call.requestId;
    if (method === "POST") headers["idempotency-key"] = call.idempotencyKey ?? randomUUID();
    let body: string | undefined;
    if (call.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(call.body);
    }
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.#send(url, { method, headers, body, signal: call.signal });
      } catch (err) {
        // No answer: a GET, or a POST under its Idempotency-Key, is safe to send again; a PATCH or DELETE is not.
        if (!(err instanceof DbaasConnectionError) || (method !== "GET" && method !== "POST") || attempt >= this.#maxRetries) throw err;
        await this.#sleep(500 * 2 ** attempt, call.signal);
        continue;
      }
      this.lastResponse = {
        status: res.status,
        requestId: res.headers.get("x-request-id") ?? undefined,
        rateLimit: rateLimitOf(res.headers),
        replayed: res.headers.get("idempotent-replayed") === "true",
        headers: res.headers,
      };
      if (res.ok) return await this.#answer(res);
      const error = await errorOf(res);
      // A POST of ours still running under the same key (409 with Retry-After) is waited for like a 503.
      const retryable = RETRIED.has(res.status) || (res.status === 409 && method === "POST" && error.retryAfter !== undefined);
      if (!retryable || attempt >= this.#maxRetries) throw error;
      const waitMs = error.retryAfter !== undefined ? error.retryAfter * 1000 : 500 * 2 ** attempt;
      if (waitMs > this.#maxRetryWaitMs) throw error;
      await this.#sleep(waitMs, call.signal);
    }
  }

  async #send(
    url: URL,
    init: { method: string; headers: Record<string, string>; body: string | undefined; signal?: AbortSignal | undefined },
  ) {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    try {
      return await fetch(url, { method: init.method, headers: init.headers, body: init.body, signal });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why = timeout.aborted ? `no answer within ${this.#timeoutMs} ms` : (cause?.code ?? cause?.message ?? String(err));
      throw new DbaasConnectionError(`cannot reach ${url.origin}: ${why}`, { cause: err });
    }
  }

  async #answer(res: Response): Promise<Answer> {
    if (res.status === 204) return { status: 204, json: undefined, bytes: undefined };
    const type = res.headers.get("content-type") ?? "";
    if (type.includes("json")) return { status: res.status, json: await res.json(), bytes: undefined };
    return { status: res.status, json: undefined, bytes: new Uint8Array(await res.arrayBuffer()) };
  }
}

async function errorOf(res: Response): Promise<DbaasError> {
  const text = await res.text();
  const retryAfter = retryAfterOf(res.headers);
  const requestId = res.headers.get("x-request-id") ?? undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { code?: string; message?: string; details?: [] }; meta?: { request_id?: string } };
    if (parsed.error?.code) {
      return new DbaasError({
        status: res.status,
        code: parsed.error.code,
        message: parsed.error.message ?? res.statusText,
        details: parsed.error.details ?? [],
        requestId: parsed.meta?.request_id ?? requestId,
        retryAfter,
      });
    }
  } catch {
    // Not the API's envelope (a proxy in between): described below.
  }
  return new DbaasError({
    status: res.status,
    code: "unexpected_response",
    message: `HTTP ${res.status} ${res.statusText}`.trim(),
    requestId,
    retryAfter,
  });
}
