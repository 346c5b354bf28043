/*
 * When a highly available database fails over, and to which standby (docs/product.md, High availability).
 * Pure: the supervisor (high-availability.ts) gathers the rows, asks here, and asks again under the rows'
 * locks before it changes anything. Every rule that keeps two primaries from taking writes at once is here:
 *
 * - the primary's agent holds a lease on it (RenewLeases) and fences the primary before the lease ends when it
 *   cannot renew; a standby is promoted only after the lease plus a margin has passed;
 * - the control plane itself must have been able to hear renewals for a whole lease plus the margin: after the
 *   databases service (or its metadata database) was down, every lease looks expired, yet every agent renews
 *   within seconds — no failover storm;
 * - only a standby that runs, whose agent is heard from, and whose WAL position was reported after the lease
 *   ended (so it is final: the old primary was fenced by then) is a candidate; the one with the most WAL wins
 *   (in synchronous mode every acknowledged commit is on at least one of them, so on that one).
 */

/** The primary, as the decision needs it. */
export interface PrimaryView {
  id: string;
  agentId: string;
  status: string;
  statusReason: string;
  desiredState: string;
  synchronous: boolean;
  /** The lease on it: who holds it and until when (undefined: never leased, nothing to fail over from). */
  lease: { agentId: string; expiresAt: Date } | undefined;
  /** A planned switchover under way (its own path; no automatic failover meanwhile). */
  switchoverTo: string | null;
}

/** A standby, as the decision needs it. */
export interface StandbyView {
  id: string;
  agentId: string;
  status: string;
  /** Its WAL position (bytes) as last reported, and when that report arrived (undefined: not running then). */
  walPosition: bigint;
  walPositionAt: Date | undefined;
  agentLastSeenAt: Date;
}

export interface DecisionInput {
  primary: PrimaryView;
  standbys: readonly StandbyView[];
  now: Date;
  /** HA_LEASE_SECONDS and HA_LEASE_MARGIN_SECONDS. */
  leaseSeconds: number;
  marginSeconds: number;
  /** Since when this control plane has been able to hear renewals without a gap (undefined: not now). */
  healthySince: Date | undefined;
  /** A standby whose agent has been silent this long is not a candidate. */
  agentTimeoutSeconds: number;
}

export type Decision = { failover: false; why: string } | { failover: true; to: string; reason: string };

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** Whether to fail `input.primary` over now, and to which standby; never more than one. */
export function decideFailover(input: DecisionInput): Decision {
  const { primary: p, now } = input;
  const graceMs = (input.leaseSeconds + input.marginSeconds) * 1000;
  if (p.desiredState !== "running") return { failover: false, why: `the database is meant to be ${p.desiredState}` };
  if (p.switchoverTo !== null) return { failover: false, why: `a switchover to ${p.switchoverTo} is under way` };
  if (!p.lease) return { failover: false, why: "its agent never held a lease on it" };
  if (p.lease.agentId !== p.agentId) return { failover: false, why: "the lease is another agent's (a failover is being applied)" };
  if (!input.healthySince) return { failover: false, why: "the control plane cannot hear lease renewals now" };
  const heard = now.getTime() - input.healthySince.getTime();
  if (heard < graceMs) {
    return {
      failover: false,
      why: `the control plane has heard renewals for ${seconds(heard)} only (a lease and its margin: ${seconds(graceMs)})`,
    };
  }
  const promotableAt = p.lease.expiresAt.getTime() + input.marginSeconds * 1000;
  if (now.getTime() < promotableAt)
    return { failover: false, why: `the lease holds until ${p.lease.expiresAt.toISOString()} (plus the margin)` };
  const live = now.getTime() - input.agentTimeoutSeconds * 1000;
  const candidates = input.standbys.filter(
    (s) =>
      s.status === "running" &&
      s.agentId !== p.agentId &&
      s.agentLastSeenAt.getTime() >= live &&
      s.walPositionAt !== undefined &&
      s.walPositionAt.getTime() >= p.lease!.expiresAt.getTime(),
  );
  if (candidates.length === 0) {
    return { failover: false, why: "no standby runs on a live host with its WAL position reported since the lease ended" };
  }
  const best = [...candidates].sort((a, b) =>
    a.walPosition === b.walPosition ? a.id.localeCompare(b.id) : a.walPosition > b.walPosition ? -1 : 1,
  )[0]!;
  const lost = `${p.lease.expiresAt.toISOString()}`;
  const reason =
    p.status === "failed"
      ? `the primary's server on ${p.agentId} failed and could not be started again (${p.statusReason || "no reason given"})`
      : `${p.agentId} stopped renewing the primary's lease (it ended ${lost})`;
  return {
    failover: true,
    to: best.id,
    reason: `${reason}; promoted the standby with the most WAL (${best.walPosition} bytes${p.synchronous ? ", synchronous mode" : ""})`,
  };
}
