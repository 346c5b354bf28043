import {
  EMAIL_MAX_LENGTH,
  FORBIDDEN_NAME_CHARACTERS,
  NAME_MAX_LENGTH,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  codePointLength,
  type Validator,
} from "@dbaas/kit";
import type { Actor, Plan, Role } from "@dbaas/proto/identity";
import { PLAN, PLANS, ROLE, SUPPORT_PLANS, type PlanName, type Vocabulary } from "@dbaas/catalogue";
import { GRANTABLE_ROLES, isScope, roleFromProto, type RoleName, type Scope } from "./authz.ts";

// Pragmatic, not RFC 5322: one @, a dotted domain, no whitespace or control characters.
const EMAIL = /^[^\s@\p{Cc}]+@[^\s@\p{Cc}.]+(\.[^\s@\p{Cc}.]+)+$/u;
export const PASSWORD_MIN = PASSWORD_MIN_LENGTH;
export const PASSWORD_MAX = PASSWORD_MAX_LENGTH;
export const NAME_MAX = NAME_MAX_LENGTH;

/** Returns the trimmed address; adds a violation when it is not one. */
export function checkEmail(v: Validator, field: string, raw: string): string {
  const email = raw.trim();
  if (email === "") v.add(field, "is required");
  else if (codePointLength(email) > EMAIL_MAX_LENGTH || !EMAIL.test(email)) v.add(field, "must be a valid e-mail address");
  return email;
}

/**
 * An address someone logs in with: required and within the length any
 * account's can have (longer, it is no account's, and it must not reach the
 * login-failure counter keyed by it). Returns it trimmed.
 */
export function checkLoginEmail(v: Validator, field: string, raw: string): string {
  const email = raw.trim();
  if (email === "") v.add(field, "is required");
  else if (codePointLength(email) > EMAIL_MAX_LENGTH) v.add(field, `must be at most ${EMAIL_MAX_LENGTH} characters`);
  return email;
}

export function checkPassword(v: Validator, field: string, password: string): void {
  const n = codePointLength(password);
  if (n === 0) v.add(field, "is required");
  else if (n < PASSWORD_MIN) v.add(field, `must be at least ${PASSWORD_MIN} characters`);
  else if (n > PASSWORD_MAX) v.add(field, `must be at most ${PASSWORD_MAX} characters`);
}

/**
 * A password to verify, not to set: required and no longer than any password
 * can be (so a huge one costs no hashing).
 */
export function checkGivenPassword(v: Validator, field: string, password: string): void {
  if (password === "") v.add(field, "is required");
  else if (codePointLength(password) > PASSWORD_MAX) v.add(field, `must be at most ${PASSWORD_MAX} characters`);
}

/**
 * Returns the trimmed name; adds a violation unless it has 1–100 characters
 * and none of the kit's forbidden name characters (control and format
 * characters such as bidi overrides and zero-width ones, line breaks, lone
 * surrogates).
 */
export function checkName(v: Validator, field: string, raw: string): string {
  const name = raw.trim();
  if (name === "") v.add(field, "is required");
  else if (codePointLength(name) > NAME_MAX) v.add(field, `must be at most ${NAME_MAX} characters`);
  else if (FORBIDDEN_NAME_CHARACTERS.test(name)) v.add(field, "must not contain control characters");
  return name;
}

export function checkRequired(v: Validator, field: string, value: string): void {
  if (value === "") v.add(field, "is required");
}

export interface ActorInfo {
  userId: string;
  role: RoleName;
  /** The calling credential's effective permissions; names identity does not know grant nothing. */
  permissions: Scope[];
}

/** The calling user, their credential's role and its permissions; a violation when the caller did not say who. */
export function checkActor(v: Validator, actor: Actor | undefined): ActorInfo {
  const role = actor ? roleFromProto(actor.role) : undefined;
  if (!actor || actor.userId === "" || !role) v.add("actor", "user_id and role are required");
  return { userId: actor?.userId ?? "", role: role ?? "viewer", permissions: (actor?.permissions ?? []).filter(isScope) };
}

/**
 * What a request names through an enum field and the deprecated string field
 * it supersedes: the enum's name once the enum is set (a number this build
 * does not know stays a name no list holds, so it is refused as any unknown
 * name is), else the string as given.
 */
function named<E extends number>(vocab: Vocabulary<E, string>, value: E, deprecatedName: string): string {
  if (value === 0) return deprecatedName;
  return vocab.name(value) ?? String(value);
}

/** A role a member may be given directly: `owner` only ever comes from a transfer. */
export function checkGrantableRole(v: Validator, field: string, roleEnum: Role, deprecatedName: string): RoleName {
  const role = named(ROLE, roleEnum, deprecatedName);
  if (role === "owner") v.add(field, "owner is reached only by transferring ownership (POST /v1/organization/transfer)");
  else v.oneOf(field, role, GRANTABLE_ROLES);
  return role as RoleName;
}

/**
 * The plan a request asks for, undefined when it asks for none: one a
 * customer may choose, or for the support caller any plan, `internal` included.
 */
export function checkPlan(
  v: Validator,
  field: string,
  request: { planEnum?: Plan; plan?: string },
  support: boolean,
): PlanName | undefined {
  const plan = request.planEnum !== undefined ? (PLAN.name(request.planEnum) ?? String(request.planEnum)) : request.plan;
  if (plan === undefined) return undefined;
  v.oneOf(field, plan, support ? SUPPORT_PLANS : PLANS);
  return plan as PlanName;
}
