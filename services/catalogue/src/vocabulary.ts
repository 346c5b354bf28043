import type { DescEnum } from "@bufbuild/protobuf";
import { DatabaseStatusSchema, type DatabaseStatus } from "@dbaas/proto/databases";
import { PlanSchema, RoleSchema, type Plan, type Role } from "@dbaas/proto/identity";
import { DATABASE_RECORD_STATUSES, SUPPORT_PLANS, type DatabaseStatusName, type PlanName } from "./catalogue.ts";
import { ROLES, type RoleName } from "./scopes.ts";

/**
 * A vocabulary that crosses service boundaries as a proto enum and is a name
 * everywhere else: in the public JSON, in the services' tables, in logs. The
 * names are the catalogue's lists; the enum value of a name is the one whose
 * proto name is the enum's prefix plus the name in capitals (`PLAN_FREE` is
 * `free`). Every service and the gateway convert through these, and nowhere
 * else, so a vocabulary has one list and one mapping.
 */
export interface Vocabulary<E extends number, N extends string> {
  /** Every name, in the catalogue's order. */
  readonly names: readonly N[];
  /** The name of an enum value; undefined for UNSPECIFIED and for numbers this build does not know. */
  name(value: E): N | undefined;
  /** The enum value of a name; undefined for anything not in `names` (the empty string included). */
  value(name: string): E | undefined;
  /**
   * What a message says, reading the enum field and, while it is unset, the
   * deprecated string field it supersedes (a peer that predates the enum, see
   * docs/decisions.md): a name, or undefined when neither holds a known one.
   */
  read(value: E, deprecatedName: string): N | undefined;
}

/**
 * Builds the mapping from the enum's descriptor and checks it against the
 * names when the module loads: a value without a name or a name without a
 * value is a build that would fail at run time, so it fails at start-up.
 */
export function vocabulary<E extends number, const N extends string>(schema: DescEnum, names: readonly N[]): Vocabulary<E, N> {
  const byValue = new Map<number, N>();
  const byName = new Map<string, E>();
  for (const v of schema.values) {
    if (v.number === 0) continue;
    const name = v.localName.toLowerCase() as N;
    if (!names.includes(name)) throw new Error(`${schema.typeName}.${v.name} has no name in the catalogue (${names.join(", ")})`);
    byValue.set(v.number, name);
    byName.set(name, v.number as E);
  }
  const missing = names.filter((n) => !byName.has(n));
  if (missing.length > 0) throw new Error(`${schema.typeName} has no value for ${missing.join(", ")}`);
  return {
    names,
    name: (value) => byValue.get(value),
    value: (name) => byName.get(name),
    read: (value, deprecatedName) => byValue.get(value) ?? (byName.has(deprecatedName) ? (deprecatedName as N) : undefined),
  };
}

/** An organization's plan: free, pro, enterprise, internal. */
export const PLAN: Vocabulary<Plan, PlanName> = vocabulary(PlanSchema, SUPPORT_PLANS);

/** A member's role: owner, admin, developer, viewer. */
export const ROLE: Vocabulary<Role, RoleName> = vocabulary(RoleSchema, ROLES);

/** A database's status: the eight the API shows, deleted and purged. */
export const DATABASE_STATUS: Vocabulary<DatabaseStatus, DatabaseStatusName> = vocabulary(DatabaseStatusSchema, DATABASE_RECORD_STATUSES);
