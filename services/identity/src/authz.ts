import { GRANTABLE_ROLES, ROLE, ROLE_SCOPES, ROLES, SCOPES, type Scope } from "@dbaas/catalogue";
import type { Role } from "@dbaas/proto/identity";

/**
 * What each role may do: the permission matrix of docs/product.md, Roles and permissions, expressed in its
 * scope names (declared once, in the catalogue's scopes.ts, which the web console shares). A principal's
 * effective permissions are what its role allows AND what its credential's scopes allow.
 */
export { SCOPES };

export type { Scope };

export const ROLE_NAMES = ROLES;
export type RoleName = (typeof ROLE_NAMES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

export function isRoleName(value: string): value is RoleName {
  return (ROLE_NAMES as readonly string[]).includes(value);
}

/** The scopes a role allows, in canonical order. */
export function roleScopes(role: RoleName): readonly Scope[] {
  return ROLE_SCOPES[role];
}

/** What a credential with `scopes` held by `role` may do, in canonical order. */
export function effectivePermissions(role: RoleName, scopes: readonly string[]): Scope[] {
  return ROLE_SCOPES[role].filter((s) => scopes.includes(s));
}

/** Sorts scopes into canonical order and drops duplicates. */
export function canonicalScopes(scopes: readonly Scope[]): Scope[] {
  return SCOPES.filter((s) => scopes.includes(s));
}

/** The proto role of a role name (the catalogue's one mapping, services/catalogue/src/vocabulary.ts). */
export function roleToProto(role: RoleName): Role {
  return ROLE.value(role)!;
}

/** The role name of a proto role; undefined for ROLE_UNSPECIFIED and numbers this build does not know. */
export function roleFromProto(role: Role): RoleName | undefined {
  return ROLE.name(role);
}

/** Roles a member can be given directly; the owner is made only by a transfer. */
export { GRANTABLE_ROLES };

/** True when `role` is at most `actor` in the order owner > admin > developer > viewer. */
export function roleWithin(role: RoleName, actor: RoleName): boolean {
  return ROLE_NAMES.indexOf(role) >= ROLE_NAMES.indexOf(actor);
}
