import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorReasonSchema, FieldViolationSchema } from "@dbaas/proto/common";

/** One invalid field, named as the public JSON API names it. */
export interface Violation {
  field: string;
  message: string;
}

/** INVALID_ARGUMENT carrying one FieldViolation detail per invalid field. */
export function invalidArgument(violations: Violation[], message = "request failed validation"): ConnectError {
  return new ConnectError(
    message,
    Code.InvalidArgument,
    undefined,
    violations.map((v) => ({ desc: FieldViolationSchema, value: create(FieldViolationSchema, v) })),
  );
}

/** An error with an explicit public error code (e.g. `payment_required`). */
export function withReason(message: string, code: Code, reason: string): ConnectError {
  return new ConnectError(message, code, undefined, [{ desc: ErrorReasonSchema, value: create(ErrorReasonSchema, { code: reason }) }]);
}

// Business outcomes that are not the caller's fault. None of them is UNAVAILABLE: that code means the
// call did not reach a handler, so a client may send it again.

/**
 * The handler ran but could not do its work because something it depends on
 * (another service, the payment processor) did not answer; nothing was
 * changed. The API answers 503 service_unavailable with this message.
 */
export const dependencyUnavailable = (message: string) => withReason(message, Code.Aborted, "service_unavailable");

/** Nothing can be done for lack of a resource we provide (capacity in a region): 503 with this message. */
export const outOfCapacity = (message: string) => withReason(message, Code.ResourceExhausted, "service_unavailable");

/** A feature this deployment has not enabled (a setting is missing): 503 with this message. */
export const notEnabled = (message: string) => withReason(message, Code.Unimplemented, "service_unavailable");

/**
 * The change was made, but what confirms it took effect (e.g. an agent
 * applying a password) did not arrive in time: 504 upstream_timeout with this
 * message, which must say what was done and what to do.
 */
export const notConfirmedInTime = (message: string) => withReason(message, Code.DeadlineExceeded, "upstream_timeout");

/** What a unary handler answers instead of an UNAVAILABLE that escaped it. */
const RAN_BUT_UNAVAILABLE = "a service this call depends on is unavailable; try again shortly";

/**
 * Keeps UNAVAILABLE meaning "the call did not run": an UNAVAILABLE escaping a
 * unary handler (e.g. a call it made to another service, passed on unchanged)
 * becomes dependencyUnavailable with a generic message, since the handler may
 * have changed something before it failed and must not be run again by a
 * retrying client. Streams keep their UNAVAILABLE: no client resends one.
 */
export function handlersNeverUnavailable(onRewrite?: (err: ConnectError) => void): Interceptor {
  return (next) => async (req) => {
    if (req.stream) return await next(req);
    try {
      return await next(req);
    } catch (err) {
      if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) throw err;
      onRewrite?.(err);
      throw dependencyUnavailable(RAN_BUT_UNAVAILABLE);
    }
  };
}

export const notFound = (what: string) => new ConnectError(`${what} not found`, Code.NotFound);
export const conflict = (message: string) => new ConnectError(message, Code.FailedPrecondition);
export const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);
export const permissionDenied = (message: string) => new ConnectError(message, Code.PermissionDenied);

/** Collects violations while validating a request; throws them all at once. */
export class Validator {
  readonly violations: Violation[] = [];
  add(field: string, message: string): this {
    this.violations.push({ field, message });
    return this;
  }
  /** Adds a violation unless `value` is one of `allowed`; returns whether it was. */
  oneOf(field: string, value: string, allowed: readonly string[]): boolean {
    if (value === "") {
      this.add(field, "is required");
      return false;
    }
    if (!allowed.includes(value)) {
      this.add(field, `must be one of: ${allowed.join(", ")}`);
      return false;
    }
    return true;
  }
  throwIfAny(): void {
    if (this.violations.length > 0) throw invalidArgument(this.violations);
  }
}
