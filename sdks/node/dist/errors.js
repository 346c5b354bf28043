/** An error answer of the API: `{error: {code, message, details}, meta: {request_id}}` and its HTTP status. */
export class DbaasError extends Error {
    name = "DbaasError";
    /** HTTP status, e.g. 422. */
    status;
    /** The API's error code, e.g. `validation_error`, `not_found`, `rate_limit_exceeded`. */
    code;
    /** One entry per invalid field (`validation_error`); empty otherwise. */
    details;
    /** The request's id (`meta.request_id`, X-Request-Id): quote it to support. */
    requestId;
    /** Seconds the API asked to wait (Retry-After), when it did. */
    retryAfter;
    constructor(init) {
        super(init.message);
        this.status = init.status;
        this.code = init.code;
        this.details = init.details ?? [];
        this.requestId = init.requestId;
        this.retryAfter = init.retryAfter;
    }
}
/** The API could not be reached (refused, reset, DNS, or no answer within the timeout): no response at all. */
export class DbaasConnectionError extends Error {
    name = "DbaasConnectionError";
    constructor(message, options) {
        super(message, options);
    }
}
/** `waitForStatus` gave up: the timeout passed, or the database reached `failed` (or was deleted) instead. */
export class DbaasWaitError extends Error {
    name = "DbaasWaitError";
    /** The status last seen. */
    lastStatus;
    constructor(message, lastStatus) {
        super(message);
        this.lastStatus = lastStatus;
    }
}
