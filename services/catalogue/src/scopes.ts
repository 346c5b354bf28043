/**
 * The credential scopes (docs/product.md, Roles and permissions), which are also the permission names the
 * gateway's routes require, and what each role allows. Identity decides which of them a principal has;
 * this file is shared so every side names the same things: the services through `@dbaas/catalogue`, the web
 * console through `@dbaas/catalogue/scopes` (bundled for the browser: this file imports nothing).
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

/**
 * What each role allows, in canonical order: the permission matrix of docs/product.md, Roles and permissions.
 * Identity enforces it (services/identity/src/authz.ts); the console offers by it (console/src/organization.ts).
 */
export const ROLE_SCOPES: Readonly<Record<RoleName, readonly Scope[]>> = {
  owner: SCOPES,
  admin: SCOPES.filter((s) => s !== "billing:write" && s !== "organization:delete"),
  developer: ["databases:read", "databases:write", "backups:write", "metrics:read", "members:read"],
  viewer: ["databases:read", "metrics:read", "members:read"],
};

/** Roles a member can be given directly; the owner is made only by a transfer. */
export const GRANTABLE_ROLES = ["admin", "developer", "viewer"] as const satisfies readonly RoleName[];
