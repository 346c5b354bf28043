import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorReasonSchema, FieldViolationSchema } from "@dbaas/proto/common";

/** The public error codes of the API (docs/product.md, Envelope and errors). */
export type PublicCode =
  | "validation_error"
  | "invalid_token"
  | "insufficient_permissions"
  | "payment_required"
  | "resource_not_found"
  | "resource_conflict"
  | "method_not_allowed"
  | "payload_too_large"
  | "request_timeout"
  | "request_header_too_large"
  | "rate_limit_exceeded"
  | "maintenance_mode"
  | "service_unavailable"
  | "upstream_timeout"
  | "internal_error";

export interface ErrorDetail {
  field: string;
  message: string;
}

/**
 * An error on its way to the client: status, public code, a message safe to
 * show, field details, and any headers it needs (WWW-Authenticate, Allow,
 * Retry-After).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: PublicCode,
    message: string,
    readonly details: ErrorDetail[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** Status of each public code when it is named explicitly (ErrorReason, or the gateway itself). */
const STATUS_OF: Record<PublicCode, number> = {
  validation_error: 422,
  invalid_token: 401,
  insufficient_permissions: 403,
  payment_required: 402,
  resource_not_found: 404,
  resource_conflict: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  // Malformed HTTP the server answers before any route (http-errors.ts).
  request_timeout: 408,
  request_header_too_large: 431,
  rate_limit_exceeded: 429,
  maintenance_mode: 503,
  service_unavailable: 503,
  upstream_timeout: 504,
  internal_error: 500,
};

/** Every public code, for the OpenAPI document. */
export const PUBLIC_CODES = Object.keys(STATUS_OF) as PublicCode[];

/**
 * The public codes a response of `status` can carry, for the OpenAPI
 * document: each code's own status, and validation_error also at 400
 * (malformed rather than invalid requests).
 */
export function publicCodesOf(status: number): PublicCode[] {
  const codes = PUBLIC_CODES.filter((c) => STATUS_OF[c] === status);
  return status === 400 ? ["validation_error", ...codes] : codes;
}

interface Mapping {
  status: number;
  code: PublicCode;
  /** Set when the upstream's own message must not reach the client (it may name hosts or internals). */
  genericMessage?: string;
}

const INTERNAL: Mapping = { status: 500, code: "internal_error", genericMessage: "internal error" };

/** The one table from Connect codes to HTTP statuses and public codes. */
const BY_CONNECT_CODE: Partial<Record<Code, Mapping>> = {
  [Code.InvalidArgument]: { status: 422, code: "validation_error" },
  [Code.OutOfRange]: { status: 422, code: "validation_error" },
  [Code.Unauthenticated]: { status: 401, code: "invalid_token" },
  [Code.PermissionDenied]: { status: 403, code: "insufficient_permissions" },
  [Code.NotFound]: { status: 404, code: "resource_not_found" },
  [Code.AlreadyExists]: { status: 409, code: "resource_conflict" },
  [Code.FailedPrecondition]: { status: 409, code: "resource_conflict" },
  [Code.Aborted]: { status: 409, code: "resource_conflict" },
  [Code.ResourceExhausted]: { status: 429, code: "rate_limit_exceeded" },
  [Code.Unavailable]: {
    status: 503,
    code: "service_unavailable",
    genericMessage: "the service is temporarily unavailable, try again shortly",
  },
  [Code.DeadlineExceeded]: {
    status: 504,
    code: "upstream_timeout",
    genericMessage: "the service did not answer in time, try again shortly",
  },
};

/** Seconds a client should wait before retrying a 429/503 that carries no better estimate. */
const DEFAULT_RETRY_AFTER_S = "5";

function isPublicCode(code: string): code is PublicCode {
  return Object.hasOwn(STATUS_OF, code);
}

export interface Classified {
  error: ApiError;
  /** True when the cause must be logged: the client only sees a generic message. */
  unexpected: boolean;
}

/**
 * Turns anything thrown while handling a request into the error the client
 * sees. Connect errors go through the table above; an `ErrorReason` detail
 * names the public code (and so the status) where the Connect code alone is
 * ambiguous, e.g. FAILED_PRECONDITION + payment_required → 402. A service
 * that names the public code wrote its message for the client, so it is
 * shown even where the code alone gets a generic one: a business outcome such
 * as ABORTED + service_unavailable ("could not check the organization's
 * databases") or RESOURCE_EXHAUSTED + service_unavailable ("no capacity for
 * PostgreSQL 17 in region nbg1") is a 503 with that message, while a bare
 * UNAVAILABLE (the call did not reach a handler) keeps the generic one.
 */
export function classify(err: unknown): Classified {
  if (err instanceof ApiError) return { error: err, unexpected: err.code === "internal_error" };
  const http = fromExpress(err);
  if (http) return { error: http, unexpected: false };
  if (!(err instanceof ConnectError)) {
    return { error: new ApiError(500, "internal_error", INTERNAL.genericMessage!), unexpected: true };
  }
  let mapping = BY_CONNECT_CODE[err.code] ?? INTERNAL;
  const reason = err.findDetails(ErrorReasonSchema)[0]?.code;
  if (reason !== undefined && isPublicCode(reason) && reason !== "internal_error") {
    mapping = { status: STATUS_OF[reason], code: reason };
  }
  const details =
    mapping.code === "validation_error" ? err.findDetails(FieldViolationSchema).map((v) => ({ field: v.field, message: v.message })) : [];
  const headers: Record<string, string> = {};
  if (mapping.status === 401) headers["WWW-Authenticate"] = 'Bearer realm="api", error="invalid_token"';
  if (mapping.status === 429 || mapping.status === 503) headers["Retry-After"] = DEFAULT_RETRY_AFTER_S;
  const message = mapping.genericMessage ?? err.rawMessage;
  return {
    error: new ApiError(mapping.status, mapping.code, message, details, headers),
    unexpected: mapping.genericMessage !== undefined,
  };
}

/**
 * Errors Express and body-parser raise (http-errors objects with a `type`):
 * the client must get the envelope, not Express's HTML page. Unparseable JSON,
 * an unsupported charset and the like are malformed requests, 400.
 */
function fromExpress(err: unknown): ApiError | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const { status, type } = err as { status?: unknown; type?: unknown };
  if (typeof status !== "number" || status < 400 || status >= 500) return undefined;
  if (type === "entity.too.large") return new ApiError(413, "payload_too_large", "request body exceeds 1 MB");
  if (type === "entity.parse.failed") return badRequest("request body is not valid JSON");
  return badRequest("malformed request");
}

// Constructors for errors the gateway raises itself.

export const badRequest = (message: string, details: ErrorDetail[] = []) => new ApiError(400, "validation_error", message, details);

export const unprocessable = (message: string, details: ErrorDetail[] = []) => new ApiError(422, "validation_error", message, details);

export const invalidToken = (message: string, tokenPresented: boolean) =>
  new ApiError(401, "invalid_token", message, [], {
    // RFC 6750 §3.1: no error attribute when the request carried no credential at all.
    "WWW-Authenticate": tokenPresented ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"',
  });

export const insufficientPermissions = (permission: string) =>
  new ApiError(403, "insufficient_permissions", `this action requires the ${permission} permission`);

export const routeNotFound = () => new ApiError(404, "resource_not_found", "no such endpoint");

export const methodNotAllowed = (allow: string[]) =>
  new ApiError(405, "method_not_allowed", "method not allowed on this endpoint", [], { Allow: allow.join(", ") });

export const rateLimited = (retryAfterS: number) =>
  new ApiError(429, "rate_limit_exceeded", "rate limit exceeded", [], { "Retry-After": String(retryAfterS) });

export const maintenance = (retryAfterS: number) =>
  new ApiError(503, "maintenance_mode", "the API is temporarily unavailable for maintenance", [], {
    "Retry-After": String(retryAfterS),
  });
