import { conflict } from "@dbaas/kit";
import { ObservedState } from "@dbaas/proto/agent";
import { DELETED, type DesiredState, type RecordedStatus, type Status } from "./statuses.ts";

/** What a caller (or support) can do to a database; all but rename and reset-password are recorded as operations by that name. */
export type Operation =
  | "create"
  | "start"
  | "stop"
  | "restart"
  | "resize"
  | "delete"
  | "restore"
  | "rename"
  | "reset-password"
  | "backup"
  | "replicate"
  | "promote"
  | "add-standbys"
  | "failover";

export interface Transition {
  /** Statuses the operation may start from, or "any"; from another it is refused (409) naming the current one. */
  readonly from: readonly RecordedStatus[] | "any";
  /** The status shown from the change until the agent reports the outcome; unset: the status stays. */
  readonly to?: RecordedStatus;
  /** What the agent is to converge to; unset: unchanged (a resize returns to where it was). */
  readonly desired?: DesiredState;
  /** How a refusal names the operation: "cannot <verb> a database that is <status>". */
  readonly verb: string;
}

/**
 * The transition table: docs/product.md's "Allowed sources" (Databases), plus docs/decisions.md's
 * additions (start, stop and restart also from failed, so a failed database can
 * be retried). Every handler that changes a database asks it; only an agent's
 * report (`onReport`) moves a database on from a transitional status `to` shows.
 */
export const TRANSITIONS = {
  // Nothing to start from: a create makes a new record.
  create: { from: [], to: "provisioning", desired: "running", verb: "create" },
  start: { from: ["stopped", "failed"], to: "starting", desired: "running", verb: "start" },
  stop: { from: ["running", "failed"], to: "stopping", desired: "stopped", verb: "stop" },
  restart: { from: ["running", "failed"], to: "restarting", desired: "running", verb: "restart" },
  resize: { from: ["running", "stopped"], to: "resizing", verb: "resize" },
  // Kept for the retention window, then purged (background.ts); restore brings it back within it.
  delete: { from: "any", to: DELETED, desired: "deleted", verb: "delete" },
  restore: { from: [DELETED], to: "starting", desired: "running", verb: "restore" },
  rename: { from: "any", verb: "rename" },
  "reset-password": { from: ["running", "stopped"], verb: "reset the password of" },
  // A base backup is taken from the running instance; its own record tracks it (backups.ts).
  backup: { from: ["running"], verb: "back up" },
  // A replica is seeded from a base backup of its running primary (replicas.ts).
  replicate: { from: ["running"], verb: "create a replica of" },
  // Of a replica: a running standby becomes a new database (replicas.ts), starting until it runs as a primary.
  promote: { from: ["running"], to: "starting", desired: "running", verb: "promote" },
  // Standbys are seeded from a base backup of the running primary (high-availability.ts).
  "add-standbys": { from: ["running"], verb: "add standbys to" },
  // A planned switchover hands a running primary to a standby; it shows starting until the standby runs as
  // the primary. (An automatic failover is the supervisor's, from whatever status the lost primary shows.)
  failover: { from: ["running"], to: "starting", desired: "running", verb: "fail over" },
} as const satisfies { readonly [op in Operation]: Transition };

/** Whether `op` may start from `status`. */
export function allows(op: Operation, status: string): boolean {
  const { from }: Transition = TRANSITIONS[op];
  return from === "any" || (from as readonly string[]).includes(status);
}

/** The transition of `op` from `status`; FAILED_PRECONDITION (409) naming the status when the table has none. */
export function transitionFrom(op: Operation, status: string, what: "database" | "replica" = "database"): Transition {
  const t: Transition = TRANSITIONS[op];
  if (!allows(op, status)) throw conflict(`cannot ${t.verb} a ${what} that is ${status}`);
  return t;
}

/** What onReport needs to know of the database. */
export interface Reported {
  status: string;
  status_reason: string;
  desired_state: string;
  deleted: boolean;
}

export interface ReportOutcome {
  /** The status to record, with its reason; unset: the status stays. */
  readonly status?: { readonly status: Status; readonly reason: string };
  /** Settle the operations waiting for this spec: succeeded when "", failed with this error otherwise; unset: they keep waiting. */
  readonly settle?: string;
}

/** The reason a failed instance gets when its agent gave none. */
export const DEFAULT_FAILURE = "the instance failed";

/**
 * What an agent's report that it observed the instance `observed`, for the
 * database's current spec, does: the only way out of a transitional status.
 * A report of the desired state settles it there; a failure marks a live
 * database failed (once per reason) and fails the waiting operations; work
 * under way changes nothing.
 */
export function onReport(db: Reported, observed: ObservedState, message: string): ReportOutcome {
  switch (observed) {
    case ObservedState.RUNNING:
      if (db.desired_state === "running" && db.status !== "running") return { status: { status: "running", reason: "" }, settle: "" };
      return {};
    case ObservedState.STOPPED:
      if (db.desired_state === "stopped" && db.status !== "stopped") return { status: { status: "stopped", reason: "" }, settle: "" };
      // A deleted database's instance has stopped: the delete is done; its status stays deleted.
      if (db.desired_state === "deleted") return { settle: "" };
      return {};
    case ObservedState.PURGED:
      return db.desired_state === "purged" ? { settle: "" } : {};
    case ObservedState.FAILED: {
      const reason = message || DEFAULT_FAILURE;
      // The same failure reported again is not a new status change.
      const changes = !db.deleted && (db.status !== "failed" || db.status_reason !== message);
      return changes ? { status: { status: "failed", reason }, settle: reason } : { settle: reason };
    }
    default:
      return {};
  }
}
