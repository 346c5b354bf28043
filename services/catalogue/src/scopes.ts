/**
 * The credential scopes (docs/product.md, Roles and permissions), which are also the permission names the
 * gateway's routes require. Identity decides which of them a principal has;
 * this list is shared so both sides name the same things.
 */
export const SCOPES = [
  "databases:read",
  "databases:write",
  "backups:write",
  "metrics:read",
  "members:read",
  "members:write",
  "settings:write",
  "billing:read",
  "billing:write",
  "organization:delete",
] as const;

export type Scope = (typeof SCOPES)[number];

/** Member roles, highest first (docs/product.md, Roles and permissions). */
export const ROLES = ["owner", "admin", "developer", "viewer"] as const;

export type RoleName = (typeof ROLES)[number];

/** Roles a member can be given directly; the owner is made only by a transfer. */
export const GRANTABLE_ROLES = ["admin", "developer", "viewer"] as const satisfies readonly RoleName[];
