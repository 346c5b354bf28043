import { describe, expect, it } from "vitest";
import { decideFailover, type DecisionInput, type StandbyView } from "../src/failover-decision.ts";

// The failover decision on its own (docs/product.md, High availability): which member, when, never two
// primaries, no storm after the control plane was down. high-availability.test.ts drives it through the service.

const T = (s: number) => new Date(Date.UTC(2026, 0, 1, 12, 0, 0) + s * 1000);
const LEASE = 10;
const MARGIN = 2;

/** The primary's agent last renewed at t=0: its lease ends at t=10, a standby may be promoted from t=12. */
function input(
  o: { now: number; standbys?: StandbyView[]; healthySince?: number | null } & Partial<DecisionInput["primary"]>,
): DecisionInput {
  const { now, standbys, healthySince, ...primary } = o;
  return {
    primary: {
      id: "db-1",
      agentId: "agent-a",
      status: "running",
      statusReason: "",
      desiredState: "running",
      synchronous: false,
      lease: { agentId: "agent-a", expiresAt: T(LEASE) },
      switchoverTo: null,
      ...primary,
    },
    standbys: standbys ?? [standby("node-b", "agent-b", 1000n)],
    now: T(now),
    leaseSeconds: LEASE,
    marginSeconds: MARGIN,
    healthySince: healthySince === null ? undefined : T(healthySince ?? -3600),
    agentTimeoutSeconds: 30,
  };
}

/** A running standby whose agent reported `wal` bytes at t=11 (after the lease ended) and is heard from at t=12. */
function standby(id: string, agentId: string, wal: bigint, o: Partial<StandbyView> = {}): StandbyView {
  return { id, agentId, status: "running", walPosition: wal, walPositionAt: T(11), agentLastSeenAt: T(12), ...o };
}

const target = (i: DecisionInput) => {
  const d = decideFailover(i);
  return d.failover ? d.to : `none: ${d.why}`;
};

describe("which member is promoted, and when", () => {
  const cases: Array<[string, DecisionInput, string | RegExp]> = [
    ["the lease still holds", input({ now: 9 }), /^none: the lease holds until/],
    ["the lease ended, the margin has not passed", input({ now: 11.9 }), /^none: the lease holds until/],
    ["the lease and the margin have passed: the standby", input({ now: 12 }), "node-b"],
    [
      "two standbys: the one with the most WAL",
      input({ now: 13, standbys: [standby("node-b", "agent-b", 1000n), standby("node-c", "agent-c", 1200n)] }),
      "node-c",
    ],
    [
      "two standbys with as much WAL: the first by id",
      input({ now: 13, standbys: [standby("node-c", "agent-c", 1000n), standby("node-b", "agent-b", 1000n)] }),
      "node-b",
    ],
    [
      "synchronous: the one with the most WAL (every acknowledged commit is on it)",
      input({ now: 13, synchronous: true, standbys: [standby("node-b", "agent-b", 5000n), standby("node-c", "agent-c", 4096n)] }),
      "node-b",
    ],
    [
      "a standby whose WAL position predates the lease's end is not a candidate (it may not be final)",
      input({ now: 13, standbys: [standby("node-b", "agent-b", 9000n, { walPositionAt: T(9) }), standby("node-c", "agent-c", 10n)] }),
      "node-c",
    ],
    [
      "no standby with a WAL position since the lease ended: wait",
      input({ now: 13, standbys: [standby("node-b", "agent-b", 9000n, { walPositionAt: T(9) })] }),
      /^none: no standby runs/,
    ],
    [
      "a standby not running (still provisioning) is not a candidate",
      input({ now: 13, standbys: [standby("node-b", "agent-b", 9000n, { status: "provisioning" })] }),
      /^none: no standby runs/,
    ],
    [
      "a standby whose own agent is silent is not a candidate",
      input({
        now: 60,
        standbys: [
          standby("node-b", "agent-b", 9000n, { agentLastSeenAt: T(20) }),
          standby("node-c", "agent-c", 1n, { agentLastSeenAt: T(59) }),
        ],
      }),
      "node-c",
    ],
    [
      "a standby that reports no WAL position (not running) is not a candidate",
      input({ now: 13, standbys: [standby("node-b", "agent-b", 0n, { walPositionAt: undefined })] }),
      /^none: no standby runs/,
    ],
    [
      "the primary's server failed: once the lease it no longer gets has ended",
      input({ now: 12, status: "failed", statusReason: "could not start" }),
      "node-b",
    ],
    ["a stopped database is never failed over", input({ now: 100, desiredState: "stopped" }), /^none: the database is meant to be stopped/],
    ["a deleted one neither", input({ now: 100, desiredState: "deleted" }), /^none: the database is meant to be deleted/],
    ["a switchover under way has its own path", input({ now: 100, switchoverTo: "node-b" }), /^none: a switchover to node-b/],
    [
      "a primary never leased (its agent never renewed) has nothing to fail over from",
      input({ now: 100, lease: undefined }),
      /^none: its agent never held/,
    ],
  ];
  it.each(cases)("%s", (_name, i, expected) => {
    if (typeof expected === "string") expect(target(i)).toBe(expected);
    else expect(target(i)).toMatch(expected);
  });

  it("names why: a lost lease, or the failed server with its reason, and the WAL it promoted at", () => {
    const lost = decideFailover(input({ now: 12 }));
    expect(lost.failover && lost.reason).toMatch(
      /^agent-a stopped renewing the primary's lease \(it ended 2026-01-01T12:00:10.000Z\); promoted the standby with the most WAL \(1000 bytes\)$/,
    );
    const failed = decideFailover(input({ now: 12, status: "failed", statusReason: "could not start", synchronous: true }));
    expect(failed.failover && failed.reason).toMatch(
      /^the primary's server on agent-a failed and could not be started again \(could not start\).*synchronous mode/,
    );
  });
});

describe("never two primaries", () => {
  it("a lease another agent holds (a failover being applied) is never failed over again", () => {
    expect(target(input({ now: 100, lease: { agentId: "agent-b", expiresAt: T(0) } }))).toMatch(/^none: the lease is another agent's/);
  });

  it("a standby on the primary's own agent is never promoted (it would not survive the host)", () => {
    expect(target(input({ now: 13, standbys: [standby("node-b", "agent-a", 9000n)] }))).toMatch(/^none: no standby runs/);
  });

  it("never before the lease plus the margin, whatever the standbys, and at most one standby each time", () => {
    // A grid of times and standbys: the decision is at most one standby, never before t=12, never on the primary's agent.
    const pool = [
      standby("node-b", "agent-b", 10n),
      standby("node-c", "agent-c", 20n),
      standby("node-d", "agent-a", 99n),
      standby("node-e", "agent-e", 30n, { status: "failed" }),
    ];
    for (let now = 0; now <= 40; now += 0.5) {
      for (let mask = 0; mask < 16; mask++) {
        const standbys = pool.filter((_s, i) => mask & (1 << i));
        const d = decideFailover(input({ now, standbys }));
        if (!d.failover) continue;
        expect(now).toBeGreaterThanOrEqual(LEASE + MARGIN);
        const chosen = standbys.filter((s) => s.id === d.to);
        expect(chosen).toHaveLength(1);
        expect(chosen[0]!.agentId).not.toBe("agent-a");
        expect(chosen[0]!.status).toBe("running");
      }
    }
  });
});

describe("the control plane was down: no failover storm", () => {
  it("leases that ended while the control plane could not hear renewals are not failed over until a whole lease and margin later", () => {
    // Down from t=-60 to t=100: every lease "ended" long ago; the agents renew within seconds of its return.
    expect(target(input({ now: 100, healthySince: 100 }))).toMatch(/^none: the control plane has heard renewals for 0 s only/);
    expect(target(input({ now: 111.5, healthySince: 100 }))).toMatch(/^none: the control plane has heard renewals for 11.5 s only/);
    // Its agent did not renew in a whole lease and margin after the return: that one is lost.
    const standbys = [standby("node-b", "agent-b", 1000n, { walPositionAt: T(110), agentLastSeenAt: T(111) })];
    expect(target(input({ now: 112, healthySince: 100, standbys }))).toBe("node-b");
  });

  it("while it cannot hear renewals at all (its metadata database is down), nothing fails over", () => {
    expect(target(input({ now: 1000, healthySince: null }))).toMatch(/^none: the control plane cannot hear lease renewals now/);
  });

  it("a hundred primaries whose leases all look expired after an outage: none fails over at once", () => {
    const decisions = Array.from({ length: 100 }, (_v, i) =>
      decideFailover(input({ now: 300, healthySince: 299, id: `db-${i}`, lease: { agentId: "agent-a", expiresAt: T(i % 50) } })),
    );
    expect(decisions.filter((d) => d.failover)).toHaveLength(0);
  });
});
