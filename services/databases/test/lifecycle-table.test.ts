import { Code, ConnectError } from "@connectrpc/connect";
import { DATABASE_STATUSES } from "@dbaas/catalogue";
import { ObservedState } from "@dbaas/proto/agent";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_FAILURE,
  TRANSITIONS,
  allows,
  onReport,
  transitionFrom,
  type Operation,
  type Reported,
  type Transition,
} from "../src/lifecycle.ts";
import { DELETED, TRANSITIONAL_STATUSES } from "../src/statuses.ts";

// The transition table on its own, without a database: lifecycle.test.ts drives the same rules through the handlers.

const RECORDED = [...DATABASE_STATUSES, DELETED];
const OPERATIONS = Object.keys(TRANSITIONS) as Operation[];
const TABLE: Readonly<Record<Operation, Transition>> = TRANSITIONS;

describe("which status each operation may start from", () => {
  // docs/product.md, Databases, "Allowed sources", plus decisions.md: start, stop and restart also from failed.
  const expected: Record<Operation, readonly string[]> = {
    create: [],
    start: ["stopped", "failed"],
    stop: ["running", "failed"],
    restart: ["running", "failed"],
    resize: ["running", "stopped"],
    delete: RECORDED,
    restore: [DELETED],
    rename: RECORDED,
    "reset-password": ["running", "stopped"],
    backup: ["running"],
    replicate: ["running"],
    promote: ["running"],
    // High availability: standbys are seeded from the running primary; a planned switchover hands a running one over.
    "add-standbys": ["running"],
    failover: ["running"],
  };

  it.each(OPERATIONS)("%s", (op) => {
    expect(RECORDED.filter((s) => allows(op, s))).toEqual(RECORDED.filter((s) => expected[op].includes(s)));
  });

  it("refuses the others with FAILED_PRECONDITION naming the operation and the status", () => {
    const refusal = (op: Operation, status: string) => {
      try {
        transitionFrom(op, status);
      } catch (err) {
        const e = ConnectError.from(err);
        return `${Code[e.code]}: ${e.rawMessage}`;
      }
      return "allowed";
    };
    expect(refusal("start", "provisioning")).toBe("FailedPrecondition: cannot start a database that is provisioning");
    expect(refusal("resize", "failed")).toBe("FailedPrecondition: cannot resize a database that is failed");
    expect(refusal("reset-password", "stopping")).toBe("FailedPrecondition: cannot reset the password of a database that is stopping");
    expect(refusal("restore", "running")).toBe("FailedPrecondition: cannot restore a database that is running");
    expect(refusal("backup", "stopped")).toBe("FailedPrecondition: cannot back up a database that is stopped");
    expect(refusal("stop", "failed")).toBe("allowed");
    expect(transitionFrom("delete", "resizing")).toBe(TRANSITIONS.delete);
  });
});

describe("where each operation leads", () => {
  it("shows a transitional status until the agent reports, converging to the desired state", () => {
    const leads = Object.fromEntries(OPERATIONS.map((op) => [op, [TABLE[op].to ?? "-", TABLE[op].desired ?? "-"]]));
    expect(leads).toEqual({
      create: ["provisioning", "running"],
      start: ["starting", "running"],
      stop: ["stopping", "stopped"],
      restart: ["restarting", "running"],
      // Back to where it was: running or stopped.
      resize: ["resizing", "-"],
      delete: [DELETED, "deleted"],
      restore: ["starting", "running"],
      rename: ["-", "-"],
      "reset-password": ["-", "-"],
      backup: ["-", "-"],
      replicate: ["-", "-"],
      // The promoted replica's new database.
      promote: ["starting", "running"],
      "add-standbys": ["-", "-"],
      // A switchover: starting until the promoted standby runs as the primary.
      failover: ["starting", "running"],
    });
    const shown = OPERATIONS.map((op) => TABLE[op].to).filter((s) => s !== undefined && s !== DELETED);
    expect(new Set(shown)).toEqual(new Set(TRANSITIONAL_STATUSES));
  });
});

describe("an agent's report for the current spec", () => {
  const db = (status: string, desired: string, o: Partial<Reported> = {}): Reported => ({
    status,
    status_reason: "",
    desired_state: desired,
    deleted: false,
    ...o,
  });

  it("settles a transitional status where the desired state is", () => {
    for (const status of ["provisioning", "starting", "restarting", "resizing", "failed"]) {
      expect(onReport(db(status, "running"), ObservedState.RUNNING, "")).toEqual({ status: { status: "running", reason: "" }, settle: "" });
    }
    for (const status of ["stopping", "resizing", "failed"]) {
      expect(onReport(db(status, "stopped"), ObservedState.STOPPED, "")).toEqual({ status: { status: "stopped", reason: "" }, settle: "" });
    }
  });

  it("changes nothing when the instance is not where it is meant to be, or is there already", () => {
    expect(onReport(db("stopping", "stopped"), ObservedState.RUNNING, "")).toEqual({});
    expect(onReport(db("starting", "running"), ObservedState.STOPPED, "")).toEqual({});
    expect(onReport(db("running", "running"), ObservedState.RUNNING, "")).toEqual({});
    expect(onReport(db("stopped", "stopped"), ObservedState.STOPPED, "")).toEqual({});
    expect(onReport(db("provisioning", "running"), ObservedState.PROGRESSING, "")).toEqual({});
    expect(onReport(db("provisioning", "running"), ObservedState.UNSPECIFIED, "")).toEqual({});
    expect(onReport(db(DELETED, "deleted", { deleted: true }), ObservedState.PURGED, "")).toEqual({});
  });

  it("settles a delete when the instance stopped and a purge when it is gone, the status staying deleted", () => {
    expect(onReport(db(DELETED, "deleted", { deleted: true }), ObservedState.STOPPED, "")).toEqual({ settle: "" });
    expect(onReport(db(DELETED, "purged", { deleted: true }), ObservedState.PURGED, "")).toEqual({ settle: "" });
  });

  it("marks a live database failed with the agent's reason, once per reason, and fails the waiting operations", () => {
    const failed = { status: { status: "failed", reason: "disk full" }, settle: "disk full" };
    expect(onReport(db("provisioning", "running"), ObservedState.FAILED, "disk full")).toEqual(failed);
    expect(onReport(db("running", "running"), ObservedState.FAILED, "disk full")).toEqual(failed);
    expect(onReport(db("failed", "running", { status_reason: "disk full" }), ObservedState.FAILED, "disk full")).toEqual({
      settle: "disk full",
    });
    expect(onReport(db("failed", "running", { status_reason: "disk full" }), ObservedState.FAILED, "no port")).toEqual({
      status: { status: "failed", reason: "no port" },
      settle: "no port",
    });
    expect(onReport(db("starting", "running"), ObservedState.FAILED, "")).toEqual({
      status: { status: "failed", reason: DEFAULT_FAILURE },
      settle: DEFAULT_FAILURE,
    });
  });

  it("never marks a deleted database failed", () => {
    expect(onReport(db(DELETED, "deleted", { deleted: true }), ObservedState.FAILED, "late failure")).toEqual({ settle: "late failure" });
  });
});
