import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Role, type Organization } from "@dbaas/proto/identity";

/** ISO 8601 UTC, or null for an unset timestamp. */
export function iso(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

/** A message field the upstream contract promises; its absence is the upstream's bug, a 500. */
export function present<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`upstream response lacks ${what}`);
  return value;
}

/** Empty strings are proto3's "unset"; the public API says null. */
export const orNull = (s: string): string | null => (s === "" ? null : s);

const ROLE_NAMES: Record<Role, string> = {
  [Role.UNSPECIFIED]: "unspecified",
  [Role.OWNER]: "owner",
  [Role.ADMIN]: "admin",
  [Role.DEVELOPER]: "developer",
  [Role.VIEWER]: "viewer",
};

/** The public name of a role (spec 2.7). */
export const roleName = (role: Role): string => ROLE_NAMES[role];

/** An organization as every route shows it. */
export function organization(org: Organization) {
  return { id: org.id, name: org.name, plan: org.plan, created_at: iso(org.createdAt) };
}
