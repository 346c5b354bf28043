import { ID } from "./ids.ts";
import { json, listOf, NO_CONTENT, protectedRoute, type Route } from "./route.ts";
import * as replicas from "./v1/replicas.ts";

const params = { id: ID.database };
const replica = { id: ID.database, rid: ID.replica };

/**
 * The read-replica part of the route table (table.ts; docs/product.md, Read
 * replicas). Seeing replicas needs what seeing databases needs
 * (databases:read, every role); making, deleting and promoting one is
 * creating or deleting a database (databases:write). A replica of another
 * database or organization is 404, as the databases service answers.
 */
export const REPLICA_ROUTES: readonly Route[] = [
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/replicas",
    params,
    summary: "List a database's read replicas, oldest first, each with its replication lag.",
    permission: "databases:read",
    response: listOf("replicas", "Replica"),
    query: replicas.listQuery,
    handler: replicas.listReplicas,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/replicas",
    params,
    summary:
      "Create a read replica: a hot standby streaming from the database over TLS, seeded from a base backup " +
      "(status `provisioning`), reachable with the database's own username and password. At most 5 per database, " +
      "of a running database (409 otherwise); billed per hour at the replica tier's price, so a payment method is needed (402).",
    permission: "databases:write",
    response: json(201, "Replica"),
    errors: [402],
    body: replicas.createBody,
    handler: replicas.createReplica,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/replicas/:rid",
    params: replica,
    summary: "Get a read replica (the connection string's password masked: the database's password works).",
    permission: "databases:read",
    response: json(200, "Replica"),
    handler: replicas.getReplica,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id/replicas/:rid",
    params: replica,
    summary: "Delete a read replica: its instance and data go at once (nothing to restore: it is a copy).",
    permission: "databases:write",
    response: NO_CONTENT,
    handler: replicas.deleteReplica,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/replicas/:rid/promote",
    params: replica,
    summary:
      "Promote a running replica (409 otherwise) to an independent, writable database: a new `db-` id, the replica's " +
      "name, tier and region, the primary's credentials (no password in this answer). The replica is gone. " +
      "It counts against the free allowance like a create (402 beyond it without a payment method in good standing).",
    permission: "databases:write",
    response: json(200, "Database"),
    errors: [402],
    handler: replicas.promoteReplica,
  }),
];
