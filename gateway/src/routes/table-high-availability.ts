import { ID } from "./ids.ts";
import { json, protectedRoute, type Route } from "./route.ts";
import * as ha from "./v1/high-availability.ts";

const params = { id: ID.database };

/**
 * High availability's part of the route table (table.ts; docs/product.md, High
 * availability). Seeing it needs databases:read (every role); changing the
 * standbys and a planned switchover are changes to what runs (databases:write).
 */
export const HIGH_AVAILABILITY_ROUTES: readonly Route[] = [
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/high-availability",
    params,
    summary: "A database's high availability: its standbys and mode, its members (the primary first) and its last failover.",
    permission: "databases:read",
    response: json(200, "HighAvailability"),
    handler: ha.getHighAvailability,
  }),
  protectedRoute({
    method: "PUT",
    path: "/v1/databases/:id/high-availability",
    params,
    summary:
      "Set a database's standbys (0, 1 or 2) and synchronous mode. Each standby runs on another host of the region (409 naming " +
      "the reason when the region has too few), streams from the primary, is promoted automatically when the primary is lost, " +
      "and is billed as compute at the database's tier (402 without a payment method in good standing). Adding standbys needs " +
      "a running database (409 otherwise); `synchronous` needs at least one (422).",
    permission: "databases:write",
    response: json(200, "HighAvailability"),
    errors: [402, 409],
    body: ha.setBody,
    handler: ha.setHighAvailability,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/failover",
    params,
    summary:
      "A planned switchover (for maintenance): the primary stops taking writes, the healthiest standby receives all of its WAL " +
      "and is promoted; the connection string stays the same. 202 with the operation (`failover`, running); 409 without a " +
      "healthy standby, when the database is not running, or while a switchover is under way.",
    permission: "databases:write",
    response: json(202, "Operation"),
    handler: ha.failover,
  }),
];
