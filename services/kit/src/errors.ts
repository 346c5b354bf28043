import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
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
  return new ConnectError(message, code, undefined, [
    { desc: ErrorReasonSchema, value: create(ErrorReasonSchema, { code: reason }) },
  ]);
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
