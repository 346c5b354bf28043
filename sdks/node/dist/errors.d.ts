import type { ErrorDetail } from "./types.ts";
/** An error answer of the API: `{error: {code, message, details}, meta: {request_id}}` and its HTTP status. */
export declare class DbaasError extends Error {
    readonly name = "DbaasError";
    /** HTTP status, e.g. 422. */
    readonly status: number;
    /** The API's error code, e.g. `validation_error`, `not_found`, `rate_limit_exceeded`. */
    readonly code: string;
    /** One entry per invalid field (`validation_error`); empty otherwise. */
    readonly details: ErrorDetail[];
    /** The request's id (`meta.request_id`, X-Request-Id): quote it to support. */
    readonly requestId: string | undefined;
    /** Seconds the API asked to wait (Retry-After), when it did. */
    readonly retryAfter: number | undefined;
    constructor(init: {
        status: number;
        code: string;
        message: string;
        details?: ErrorDetail[];
        requestId?: string | undefined;
        retryAfter?: number | undefined;
    });
}
/** The API could not be reached (refused, reset, DNS, or no answer within the timeout): no response at all. */
export declare class DbaasConnectionError extends Error {
    readonly name = "DbaasConnectionError";
    constructor(message: string, options?: {
        cause?: unknown;
    });
}
/** `waitForStatus` gave up: the timeout passed, or the database reached `failed` (or was deleted) instead. */
export declare class DbaasWaitError extends Error {
    readonly name = "DbaasWaitError";
    /** The status last seen. */
    readonly lastStatus: string | undefined;
    constructor(message: string, lastStatus: string | undefined);
}
