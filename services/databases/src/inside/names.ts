import type { Validator } from "@dbaas/kit";

/**
 * Names of roles and logical databases (docs/product.md, Inside the database):
 * plain identifiers, so they need no quoting anywhere — lowercase letter or
 * underscore, then lowercase letters, digits and underscores, at most 63 —
 * and not PostgreSQL's own (`pg_…`), ours (`dbaas_…`) or a reserved word.
 */
export const PLAIN_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
export const PLAIN_IDENTIFIER_PATTERN = PLAIN_IDENTIFIER.source;

/** Role names PostgreSQL reserves (CREATE ROLE refuses them). */
const RESERVED_ROLES = new Set(["public", "none", "current_user", "current_role", "session_user", "user", "all"]);
/** Databases every server has that are not the customer's. */
const RESERVED_DBS = new Set(["postgres", "template0", "template1"]);

/** Whether `name` could name a role or logical database at all (a path's name that cannot is unknown: 404). */
export function isPlainName(name: string): boolean {
  return PLAIN_IDENTIFIER.test(name) && !name.startsWith("pg_") && !name.startsWith("dbaas_");
}

function checkPlain(v: Validator, field: string, name: string, what: string): boolean {
  if (name === "") {
    v.add(field, "is required");
    return false;
  }
  if (!PLAIN_IDENTIFIER.test(name)) {
    v.add(field, `must be a plain identifier: a lowercase letter or _, then lowercase letters, digits or _, at most 63 characters`);
    return false;
  }
  if (name.startsWith("pg_") || name.startsWith("dbaas_")) {
    v.add(field, `must not start with pg_ or dbaas_ (those ${what}s are the server's)`);
    return false;
  }
  return true;
}

export function validateRoleName(v: Validator, field: string, name: string): void {
  if (checkPlain(v, field, name, "role") && RESERVED_ROLES.has(name)) v.add(field, `${name} is a reserved word`);
}

export function validateDbName(v: Validator, field: string, name: string): void {
  if (checkPlain(v, field, name, "database") && RESERVED_DBS.has(name)) v.add(field, `${name} is one of the server's own databases`);
}
