import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Role, type Organization } from "@dbaas/proto/identity";
import { list, type Reply } from "../middleware/envelope.ts";
import { pagination, type QueryValues } from "../schema.ts";

/** ISO 8601 UTC, or null for an unset timestamp. */
export function iso(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

/** A message field the upstream contract promises; its absence is the upstream's bug, a 500. */
export function present<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`upstream response lacks ${what}`);
  return value;
}

/**
 * The requested page of a list the upstream answers whole (an organization
 * has few members, keys, payment methods, invoices): cut here, each item mapped.
 */
export function pageOf<T>(name: string, all: readonly T[], query: QueryValues, map: (item: T) => unknown): Reply {
  const { page, perPage } = pagination(query);
  return list(name, all.slice((page - 1) * perPage, page * perPage).map(map), { page, perPage, total: all.length });
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
