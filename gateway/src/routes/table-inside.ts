import { ID } from "./ids.ts";
import { json, listOf, NO_CONTENT, protectedRoute, type Route } from "./route.ts";
import * as inside from "./v1/inside.ts";

const params = { id: ID.database };
const role = { id: ID.database, name: ID.role };
const logicalDb = { id: ID.database, name: ID.logicalDb };
const extension = { id: ID.database, name: ID.extension };

/**
 * Inside a database (docs/product.md, Inside the database): what a customer does without a superuser.
 * Reading needs databases:read (every role); changing roles and logical databases, databases:write.
 * They are read from and changed on the running server (409 naming the status otherwise).
 */
export const INSIDE_ROUTES: readonly Route[] = [
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/roles",
    params,
    summary: "List the database's roles (dbadmin included, and roles made in SQL), by name; never a password.",
    permission: "databases:read",
    errors: [409],
    response: listOf("roles", "Role"),
    query: inside.listQuery,
    handler: inside.listRoles,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/roles",
    params,
    summary:
      "Create a LOGIN role (never superuser, replication or bypassrls) with a generated password, shown this once. " +
      "dbadmin may grant it privileges, alter or drop it. At most 50 roles per database (409 beyond); a taken name is 409.",
    permission: "databases:write",
    response: json(201, "CreatedRole"),
    body: inside.createRoleBody,
    handler: inside.createRole,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id/roles/:name",
    params: role,
    summary:
      "Drop a role and end its sessions. dbadmin cannot be deleted; a role that still owns objects or holds privileges " +
      "is 409 saying in which databases (REASSIGN OWNED / DROP OWNED there first).",
    permission: "databases:write",
    errors: [409],
    response: NO_CONTENT,
    handler: inside.deleteRole,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/roles/:name/reset-password",
    params: role,
    summary:
      "Give a role a new password (shown this once): when the answer arrives the old one no longer works and the role's " +
      "open sessions, on the read replicas too, have ended. For dbadmin this is the database's reset-password.",
    permission: "databases:write",
    response: json(200, "CreatedRole"),
    handler: inside.resetRolePassword,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/dbs",
    params,
    summary: "List the server's logical databases (defaultdb included), by name, with owner and size.",
    permission: "databases:read",
    errors: [409],
    response: listOf("dbs", "LogicalDb"),
    query: inside.listQuery,
    handler: inside.listDbs,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/dbs",
    params,
    summary: "Create a logical database owned by a role (default dbadmin); at most 50; a taken name is 409.",
    permission: "databases:write",
    response: json(201, "LogicalDb"),
    body: inside.createDbBody,
    handler: inside.createDb,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id/dbs/:name",
    params: logicalDb,
    summary: "Drop a logical database; defaultdb cannot be deleted, nor one with open connections (409 saying how many).",
    permission: "databases:write",
    errors: [409],
    response: NO_CONTENT,
    handler: inside.deleteDb,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/config",
    params,
    summary:
      "The database's configuration: every parameter that can be changed, with its value, default (the tier's, else " +
      "PostgreSQL's), unit, type, bounds on the database's tier, and whether a restart applies it or is awaited.",
    permission: "databases:read",
    response: json(200, "Config"),
    handler: inside.getConfig,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/databases/:id/config",
    params,
    summary:
      "Change parameters of the allowlist, all or nothing (422 naming each refused one). A running database answers once " +
      "its server has them (a new session sees them); restart-only ones show pending_restart until a restart. Kept across " +
      "restart, resize (a tier they do not fit is refused) and restore.",
    permission: "databases:write",
    response: json(200, "Config"),
    errors: [409],
    body: inside.updateConfigBody,
    handler: inside.updateConfig,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/extensions",
    params,
    summary:
      "List the extensions the server's binaries offer (pg_available_extensions), with versions, whether the logical database " +
      "(`db`, default defaultdb) has each, whether it is trusted, and whether it can be installed here (`allowed`).",
    permission: "databases:read",
    response: listOf("extensions", "Extension"),
    errors: [409],
    query: inside.extensionsQuery,
    handler: inside.listExtensions,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/extensions",
    params,
    summary:
      "Install an extension of the allowlist (pg_stat_statements, pgcrypto, pg_trgm, citext, hstore, uuid-ossp, btree_gin, " +
      "btree_gist, …) as superuser in a logical database (default defaultdb); any other (an untrusted language, one reaching " +
      "outside the server) is 422. Installing one already installed changes nothing.",
    permission: "databases:write",
    response: json(201, "Extension"),
    body: inside.installExtensionBody,
    handler: inside.installExtension,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id/extensions/:name",
    params: extension,
    summary: "Drop an extension from a logical database (`db`, default defaultdb); 409 while objects depend on it, 404 when not installed.",
    permission: "databases:write",
    response: NO_CONTENT,
    errors: [409],
    query: inside.extensionQuery,
    handler: inside.deleteExtension,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/logs",
    params,
    summary:
      "The server's log (jsonlog), newest last: without a cursor the newest `limit` entries matching the filters (`since`, " +
      "`until`, `severity` and worse, `q` in the text); `next_cursor` gives what was written after them (poll it to tail), " +
      "`prev_cursor` the entries before. Kept 7 days or the tier's log quota; never a password. Any status.",
    permission: "metrics:read",
    response: json(200, "LogPage"),
    query: inside.logsQuery,
    handler: inside.listLogs,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/queries",
    params,
    summary:
      "Query insights from pg_stat_statements: the statements of your roles in normalized text (constants as $1), ordered " +
      "by total_time, mean_time or calls (descending), with calls, times, rows and cache hit ratio. While running (409 otherwise).",
    permission: "metrics:read",
    errors: [409],
    response: json(200, "QueryPage"),
    query: inside.queriesQuery,
    handler: inside.listQueries,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/queries/reset",
    params,
    summary:
      "Start the query statistics again from nothing (pg_stat_statements_reset). While running (409 otherwise). A change: " +
      "databases:write, where reading them is metrics:read.",
    permission: "databases:write",
    errors: [409],
    response: NO_CONTENT,
    handler: inside.resetQueries,
  }),
];
