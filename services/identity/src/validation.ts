import type { Validator } from "@dbaas/kit";
import type { Actor } from "@dbaas/proto/identity";
import { GRANTABLE_ROLES, roleFromProto, type RoleName } from "./authz.ts";

// Pragmatic, not RFC 5322: one @, a dotted domain, no whitespace or control characters.
const EMAIL = /^[^\s@\p{Cc}]+@[^\s@\p{Cc}.]+(\.[^\s@\p{Cc}.]+)+$/u;
const CONTROL = /\p{Cc}/u;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;
export const NAME_MAX = 100;

const length = (s: string) => [...s].length;

/** Returns the trimmed address; adds a violation when it is not one. */
export function checkEmail(v: Validator, field: string, raw: string): string {
  const email = raw.trim();
  if (email === "") v.add(field, "is required");
  else if (email.length > 254 || !EMAIL.test(email)) v.add(field, "must be a valid e-mail address");
  return email;
}

export function checkPassword(v: Validator, field: string, password: string): void {
  const n = length(password);
  if (n === 0) v.add(field, "is required");
  else if (n < PASSWORD_MIN) v.add(field, `must be at least ${PASSWORD_MIN} characters`);
  else if (n > PASSWORD_MAX) v.add(field, `must be at most ${PASSWORD_MAX} characters`);
}

/** Returns the trimmed name; adds a violation unless it has 1–100 characters and no control characters. */
export function checkName(v: Validator, field: string, raw: string): string {
  const name = raw.trim();
  if (name === "") v.add(field, "is required");
  else if (length(name) > NAME_MAX) v.add(field, `must be at most ${NAME_MAX} characters`);
  else if (CONTROL.test(name)) v.add(field, "must not contain control characters");
  return name;
}

export function checkRequired(v: Validator, field: string, value: string): void {
  if (value === "") v.add(field, "is required");
}

export interface ActorInfo {
  userId: string;
  role: RoleName;
}

/** The calling user and their credential's role; a violation when the caller did not say. */
export function checkActor(v: Validator, actor: Actor | undefined): ActorInfo {
  const role = actor ? roleFromProto(actor.role) : undefined;
  if (!actor || actor.userId === "" || !role) v.add("actor", "user_id and role are required");
  return { userId: actor?.userId ?? "", role: role ?? "viewer" };
}

/** A role a member may be given directly: `owner` only ever comes from a transfer. */
export function checkGrantableRole(v: Validator, field: string, role: string): RoleName {
  if (role === "owner") v.add(field, "owner is reached only by transferring ownership (POST /v1/organization/transfer)");
  else v.oneOf(field, role, GRANTABLE_ROLES);
  return role as RoleName;
}
