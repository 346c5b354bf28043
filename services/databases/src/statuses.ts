import type { DATABASE_STATUSES, DatabaseStatusName } from "@dbaas/catalogue";

/**
 * The databases service's vocabulary of states, in one place: what a database
 * shows (its status) and what its agent is to make of it (its desired state).
 * Strings, as stored. The statuses the API shows are the shared catalogue's
 * (`DATABASE_STATUSES`, shared with the gateway); what only this service
 * records is here.
 */

/** A status the API shows (docs/product.md, Databases). */
export type Status = (typeof DATABASE_STATUSES)[number];

/**
 * Statuses shown only until the agent reports the outcome. A database left in
 * one by an agent that went silent is marked failed (background.ts).
 */
export const TRANSITIONAL_STATUSES = [
  "provisioning",
  "starting",
  "stopping",
  "restarting",
  "resizing",
] as const satisfies readonly Status[];

/**
 * The status a deleted database is recorded with (and billing is told of),
 * through its retention window and after its purge. Never shown: a deleted
 * database is not found.
 */
export const DELETED = "deleted" satisfies DatabaseStatusName;
/**
 * The status a read replica is retired with when it is promoted (its instance
 * now belongs to the new database): never shown, never sent to an agent again.
 */
export const PROMOTED = "promoted";
export type RecordedStatus = Status | typeof DELETED | typeof PROMOTED;

/** What the agent converges an instance to (the agent proto's DesiredState, as stored). */
export type DesiredState = "running" | "stopped" | "deleted" | "purged";
