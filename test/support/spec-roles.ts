/**
 * The permission table of docs/product.md (Roles and permissions), written out as the tests' own expectation (never
 * derived from the code under test): the gateway's route × role matrix and the
 * end-to-end API-key tests judge answers by it.
 */
export type SpecRole = "owner" | "admin" | "developer" | "viewer";

/** docs/product.md, Roles and permissions, row by row, in its scope names. */
export const SPEC_2_7: Record<SpecRole, string[]> = {
  //       view dbs          create/delete dbs   backups          metrics         (view team)     manage members   settings          view billing    manage billing   delete org
  owner: [
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
  ],
  admin: [
    "databases:read",
    "databases:write",
    "backups:write",
    "metrics:read",
    "members:read",
    "members:write",
    "settings:write",
    "billing:read",
  ],
  developer: ["databases:read", "databases:write", "backups:write", "metrics:read", "members:read"],
  viewer: ["databases:read", "metrics:read", "members:read"],
};
