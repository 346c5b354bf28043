import { ID } from "./ids.ts";
import { json, listOf, NO_CONTENT, protectedRoute, type Route } from "./route.ts";
import * as edge from "./v1/edge.ts";

const params = { id: ID.database };

/**
 * A database's edge, part of the route table (table.ts; docs/product.md, Trusted sources and
 * connection pooling): who may connect, and its connection pooler. Seeing either needs
 * databases:read; changing either databases:write. Another organization's database is 404.
 */
export const EDGE_ROUTES: readonly Route[] = [
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/trusted-sources",
    params,
    summary:
      "List the addresses allowed to connect to the database (its port, its pooler and its replicas), oldest first. " +
      "An empty list admits every address.",
    permission: "databases:read",
    response: listOf("trusted_sources", "TrustedSource"),
    query: edge.listQuery,
    handler: edge.listTrustedSources,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/trusted-sources",
    params,
    summary:
      "Allow an IPv4 or IPv6 address or network (CIDR) to connect. Once a database has trusted sources, connections from " +
      "any other address are refused before they reach PostgreSQL, within 5 seconds. With `expires_at` the entry stops " +
      "admitting at that instant and leaves the list. At most 50 per database (409); a CIDR with host bits set is a 422 " +
      "naming the network meant; one already listed is a 409.",
    permission: "databases:write",
    response: json(201, "TrustedSource"),
    errors: [409],
    body: edge.createBody,
    handler: edge.createTrustedSource,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id/trusted-sources/:tsid",
    params: { id: ID.database, tsid: ID.trustedSource },
    summary: "Remove a trusted source: its address stops being admitted within 5 seconds (unless another entry covers it).",
    permission: "databases:write",
    response: NO_CONTENT,
    handler: edge.deleteTrustedSource,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/pooler",
    params,
    summary:
      "The database's connection pooler (PgBouncer): its own host name and port, the database's username and password. " +
      "`enabled: false` with a `reason` where the database's host cannot run one.",
    permission: "databases:read",
    response: json(200, "Pooler"),
    handler: edge.getPooler,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/databases/:id/pooler",
    params,
    summary:
      "Change the pooler: enable or disable it, its mode (`transaction`, the default, or `session`) and its pool size " +
      "(1 … the tier's max_connections − 5; 422 naming the field otherwise). 409 when its host cannot run a pooler.",
    permission: "databases:write",
    response: json(200, "Pooler"),
    errors: [409],
    body: edge.updatePoolerBody,
    handler: edge.updatePooler,
  }),
];
