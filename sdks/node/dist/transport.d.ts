/** The default API address: a local stack (`npm start`). */
export declare const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
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
    json: any;
    bytes: Uint8Array | undefined;
}
/**
 * Sends requests: bearer credential, JSON in and out, an Idempotency-Key on
 * every POST (kept across its retries, so a retried create never creates
 * twice), retries of 429 and 503 after their Retry-After (bounded) and of a
 * GET or POST that got no answer, error envelopes turned into `DbaasError`.
 */
export declare class Transport {
    #private;
    readonly baseUrl: string;
    token: string | undefined;
    lastResponse: ResponseInfo | undefined;
    constructor(opts?: ClientOptions);
    request(method: string, path: string, call?: Call): Promise<Answer>;
}
