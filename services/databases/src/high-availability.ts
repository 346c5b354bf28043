import { conflict, newId, notFound, withTransaction, type Validator } from "@dbaas/kit";
import { requireGoodStanding } from "@dbaas/catalogue";
import type pg from "pg";
import type { AppContext } from "./context.ts";
import { whileHolding } from "./singleton.ts";
import { insertDatabase, lockOwned, setStatus, type DatabaseRow } from "./db/databases.ts";
import {
  agentsLastSeen,
  dropLease,
  insertDiscard,
  liveStandbys,
  lockLease,
  lockStandbyHosts,
  lockPrimaryAndStandbys,
  lockStandbys,
  moveLease,
  moveToStandby,
  portFreeOn,
  setHaConfig,
  fenceForSwitchover,
  setSwitchover,
  standbysWithAgents,
  supervisedPrimaries,
  type StandbyHost,
  type SupervisedPrimary,
  type SupervisedStandby,
} from "./db/high-availability.ts";
import { notifyAgent } from "./db/notify.ts";
import {
  attachReplacement,
  failOperation,
  notePendingReplacements,
  recordStandbyReplaced,
  retargetOperation,
  runningFailover,
  startOperation,
  type OperationRow,
} from "./db/operations.ts";
import { lockLiveReplicas, retire } from "./db/replicas.ts";
import { publishRecord } from "./dns/records.ts";
import { decideFailover, type Decision, type PrimaryView, type StandbyView } from "./failover-decision.ts";
import { TRANSITIONS, transitionFrom } from "./lifecycle.ts";
import { purgeReplica, reconcileSeeds } from "./replicas.ts";
import { PROMOTED } from "./statuses.ts";

/*
 * High availability (docs/product.md, High availability): a primary with 1 or 2 standbys, each a streaming
 * replica ("node-…", a `databases` row with `standby`) on another agent of its region at the primary's port,
 * never published, billed as compute. The supervisor (superviseHighAvailability, every HA_SUPERVISE_INTERVAL_MS)
 * promotes the standby with the most WAL when the primary's lease ran out (failover-decision.ts), finishes
 * planned switchovers, keeps the wanted number of standbys and replaces those whose host is lost.
 */

/** Standbys a database may have. */
export const MAX_STANDBYS = 2;

/** The rules of a request's standbys and mode. */
export function validateHighAvailability(v: Validator, standbys: number, synchronous: boolean): void {
  if (!Number.isInteger(standbys) || standbys < 0 || standbys > MAX_STANDBYS) v.add("standbys", `must be 0, 1 or ${MAX_STANDBYS}`);
  else if (synchronous && standbys < 1) v.add("synchronous", "needs at least 1 standby");
}

const hostWord = (n: number) => `${n} host${n === 1 ? "" : "s"}`;

/**
 * The 409 of a region that lacks hosts for standbys: each standby runs on a
 * host of its own, apart from the primary's, on the primary's port (so the
 * connection string survives a failover).
 */
function tooFewHosts(region: string, version: string, port: number, have: number, need: number) {
  return conflict(
    `region ${region} has ${hostWord(have)} besides the primary's that can take a standby now (live, with PostgreSQL ${version}, ` +
      `capacity left and port ${port} free); ${need} standby${need === 1 ? "" : "s"} need${need === 1 ? "s" : ""} ${hostWord(need)}, ` +
      "each apart from the primary and from each other",
  );
}

/** A place for a new database and its standbys: one port free on the primary's agent and on each standby's. */
export interface HaPlacement {
  agentId: string;
  port: number;
  standbyAgents: string[];
}

/**
 * Places a new database with `standbys` standbys: the lowest port free on at
 * least 1 + standbys live agents of the region, the primary on the one of
 * them with the most free capacity, the standbys on the next. 409 naming the
 * reason when no port is free on that many hosts.
 */
export async function placeWithStandbys(
  db: pg.ClientBase,
  c: { region: string; version: string; timeoutSeconds: number; now: Date },
  standbys: number,
): Promise<HaPlacement> {
  const hosts = await lockStandbyHosts(db, c);
  const ports = hosts.flatMap((h) => (h.free > 0 ? [h.port_range_start, h.port_range_end] : []));
  if (ports.length > 0) {
    for (let port = Math.min(...ports); port <= Math.max(...ports); port++) {
      const free = hosts.filter((h) => portFreeOn(h, port));
      if (free.length > standbys) return { agentId: free[0]!.id, port, standbyAgents: free.slice(1, 1 + standbys).map((h) => h.id) };
    }
  }
  const usable = hosts.filter((h) => h.free > 0).length;
  throw conflict(
    `region ${c.region} has ${hostWord(usable)} that can take a server now (live, with PostgreSQL ${c.version}, capacity left) ` +
      `and no port free on ${hostWord(standbys + 1)} at once; a database with ${standbys} standby${standbys === 1 ? "" : "s"} needs ` +
      `${hostWord(standbys + 1)} sharing a free port (its connection string survives a failover)`,
  );
}

/** A new standby of `primary` on `agentId` at the primary's port, provisioning until its agent reports it streaming. */
export async function insertStandby(db: pg.ClientBase, primary: DatabaseRow, agentId: string): Promise<DatabaseRow> {
  const id = newId("node");
  const { to: status, desired } = TRANSITIONS.create;
  const row = await insertDatabase(db, {
    id,
    organizationId: primary.organization_id,
    // A standby is never listed under a name; its id keeps the replica-name index unique.
    name: id,
    region: primary.region,
    tier: primary.tier,
    version: primary.version,
    status,
    desired,
    agentId,
    port: primary.port,
    scramVerifier: primary.scram_verifier,
    primaryId: primary.id,
    standby: true,
  });
  await setStatus(db, row, status);
  await startOperation(db, row.id, "create", row.generation);
  await notifyAgent(db, agentId);
  return row;
}

/**
 * Brings the primary's (locked by the caller) standbys to its wanted number:
 * the newest beyond it purged; missing ones placed on hosts apart from the
 * primary's and each other's, at its port, and their seeds requested. With
 * `strict`, a region without room enough is a 409 naming why (a request);
 * otherwise as many as fit are placed and the rest wait for the next pass
 * (after a failover, a host may come back). Hosts in `exclude` are never
 * chosen (those of standbys just retired as lost). Each standby placed is the
 * replacement a `standby_replaced` operation may be waiting for. Answers the
 * standbys added.
 */
export async function ensureStandbys(
  ctx: AppContext,
  db: pg.ClientBase,
  primary: DatabaseRow,
  strict: boolean,
  exclude: ReadonlySet<string> = new Set(),
): Promise<DatabaseRow[]> {
  const standbys = await lockStandbys(db, primary.id);
  const wanted = primary.deleted_at === null && primary.desired_state === "running" ? primary.ha_standbys : standbys.length;
  let changed = false;
  if (standbys.length > primary.ha_standbys) {
    // Those not running go first, then the newest.
    const order = [...standbys].sort(
      (a, b) => Number(a.status === "running") - Number(b.status === "running") || +b.created_at - +a.created_at,
    );
    for (const s of order.slice(0, standbys.length - primary.ha_standbys)) await purgeReplica(ctx, db, s);
    changed = true;
  }
  const missing = wanted - standbys.length;
  const added: DatabaseRow[] = [];
  if (missing > 0) {
    const hosts = await lockStandbyHosts(db, {
      region: primary.region,
      version: primary.version,
      timeoutSeconds: ctx.cfg.agentTimeoutSeconds,
      now: ctx.clock.now(),
    });
    const taken = new Set([primary.agent_id, ...standbys.map((s) => s.agent_id), ...exclude]);
    const usable: StandbyHost[] = hosts.filter((h) => !taken.has(h.id) && portFreeOn(h, primary.port));
    if (usable.length < missing && strict) throw tooFewHosts(primary.region, primary.version, primary.port, usable.length, missing);
    for (const h of usable.slice(0, missing)) {
      const s = await insertStandby(db, primary, h.id);
      ctx.log.info("standby placed", { database_id: primary.id, standby_id: s.id, agent_id: h.id, port: s.port });
      const detail = `; its replacement ${s.id} was placed on ${h.id} at ${ctx.clock.now().toISOString()}`;
      if (await attachReplacement(db, primary.id, s.id, detail)) {
        ctx.log.info("lost standby's replacement placed", { database_id: primary.id, standby_id: s.id, agent_id: h.id });
      }
      added.push(s);
    }
    if (added.length > 0) {
      changed = true;
      await reconcileSeeds(ctx, db, primary);
    }
  }
  // The primary's spec: its slots, its synchronous standbys.
  if (changed) await notifyAgent(db, primary.agent_id);
  return added;
}

/** The organization's database's high availability as the API shows it. */
export async function getHighAvailability(
  ctx: AppContext,
  orgId: string,
  id: string,
): Promise<{ primary: DatabaseRow; standbys: DatabaseRow[] }> {
  const primary = await ctx.pool
    .query<DatabaseRow>("SELECT * FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL AND primary_id IS NULL", [
      id,
      orgId,
    ])
    .then((r) => r.rows[0]);
  if (!primary) throw notFound("database");
  return { primary, standbys: await liveStandbys(ctx.pool, primary.id) };
}

/**
 * Sets the organization's database's standbys (0-2) and mode. Adding
 * standbys needs a running database (409 naming its status), the
 * organization's good standing (402: standbys are billed as compute) and room
 * in the region (409 naming why); removing them purges the newest. A change
 * while a switchover is under way is a 409.
 */
export async function setHighAvailability(
  ctx: AppContext,
  orgId: string,
  id: string,
  standbys: number,
  synchronous: boolean,
): Promise<{ primary: DatabaseRow; standbys: DatabaseRow[] }> {
  await withTransaction(ctx.pool, async (db) => {
    const row = await lockOwned(db, orgId, id);
    if (row.switchover_to !== null) throw conflict("a switchover is under way; change the standbys once it is over");
    const current = await lockStandbys(db, row.id);
    if (standbys > current.length) {
      transitionFrom("add-standbys", row.status);
      await requireGoodStanding(ctx.billing, ctx.log, orgId, "run standbys (billed as compute)");
    }
    const updated = await setHaConfig(db, row.id, standbys, synchronous);
    if (standbys === 0) await dropLease(db, row.id);
    await ensureStandbys(ctx, db, updated, true);
    // Its spec: whether it needs a lease, its synchronous standbys.
    await notifyAgent(db, updated.agent_id);
  });
  ctx.log.info("high availability set", { database_id: id, standbys, synchronous });
  // Its record's TTL: 5 s with standbys (a failover's move is seen soon), the default without.
  await publishRecord(ctx, id).catch((err: unknown) =>
    ctx.log.warn("DNS record's TTL not updated yet; the reconcile retries", { database_id: id, error: err }),
  );
  return await getHighAvailability(ctx, orgId, id);
}

/** A standby the decision and the switchover look at. */
function standbyView(s: SupervisedStandby): StandbyView {
  return {
    id: s.id,
    agentId: s.agent_id,
    status: s.status,
    walPosition: BigInt(s.wal_position),
    walPositionAt: s.wal_position_at ?? undefined,
    agentLastSeenAt: s.agent_last_seen_at,
  };
}

function primaryView(p: DatabaseRow, lease: { agent_id: string; expires_at: Date } | undefined): PrimaryView {
  return {
    id: p.id,
    agentId: p.agent_id,
    status: p.status,
    statusReason: p.status_reason,
    desiredState: p.desired_state,
    synchronous: p.ha_synchronous,
    lease: lease ? { agentId: lease.agent_id, expiresAt: lease.expires_at } : undefined,
    switchoverTo: p.switchover_to,
  };
}

/** A healthy standby for a switchover: running, its agent heard from, its WAL position known; the most WAL first. */
function healthiest(ctx: AppContext, standbys: readonly SupervisedStandby[]): SupervisedStandby | undefined {
  const live = ctx.clock.now().getTime() - ctx.cfg.agentTimeoutSeconds * 1000;
  return standbys
    .filter((s) => s.status === "running" && s.agent_last_seen_at.getTime() >= live && s.wal_position_at !== null)
    .sort((a, b) => (BigInt(b.wal_position) > BigInt(a.wal_position) ? 1 : BigInt(b.wal_position) < BigInt(a.wal_position) ? -1 : 0))[0];
}

/**
 * A planned switchover (POST …/failover): once the chosen standby has nearly
 * all the WAL the running primary is fenced (its spec says so; no
 * generation: nothing restarts), and once its agent reports it fenced with
 * its final WAL position and the standby has received all of it, the
 * supervisor promotes that standby (superviseSwitchover). Answers the operation
 * (failover, running). 409 without standbys, a running primary, a healthy
 * standby, or while one is under way.
 */
export async function startSwitchover(ctx: AppContext, orgId: string, id: string): Promise<OperationRow> {
  return await withTransaction(ctx.pool, async (db) => {
    const p = await lockOwned(db, orgId, id);
    if (p.ha_standbys === 0) throw conflict("the database has no standbys to fail over to; set standbys first (PUT …/high-availability)");
    transitionFrom("failover", p.status);
    if (p.switchover_to !== null) throw conflict("a switchover is already under way");
    const target = healthiest(ctx, await standbysWithAgents(db, p.id));
    if (!target) throw conflict("no healthy standby to fail over to (running, streaming, on a live host); try again once one is");
    await setSwitchover(db, p.id, target.id, ctx.clock.now());
    const op = await startOperation(db, p.id, "failover", BigInt(p.generation) + 1n, {
      reason: "planned switchover requested",
      from: p.node_id ?? p.id,
      to: target.id,
    });
    await notifyAgent(db, p.agent_id);
    ctx.log.info("switchover requested", { database_id: p.id, standby_id: target.id, operation_id: op.id });
    return op;
  });
}

type FailoverKind = { kind: "failover"; healthySince: Date | undefined } | { kind: "switchover" };

/**
 * Promotes standby `standbyId` of primary `primaryId`, in one transaction,
 * after checking again under the rows' locks that it is still due: the
 * standby retired (its instance adopted as the database's on the standby's
 * agent, same port), the database's row moved there (a new generation, status
 * starting until the new server runs), the lease passed to that agent, the
 * old primary's instance to be discarded by its agent, the operation
 * `failover` with the reason and both members, `last_failover` recorded. Then
 * the host name moves and a replacement standby is placed. Answers whether it
 * happened.
 */
export async function executeFailover(ctx: AppContext, primaryId: string, standbyId: string, how: FailoverKind): Promise<boolean> {
  const now = ctx.clock.now();
  const done = await withTransaction(ctx.pool, async (db) => {
    const locked = await lockPrimaryAndStandbys(db, primaryId);
    if (!locked) return undefined;
    const { p, standbys } = locked;
    const s = standbys.find((x) => x.id === standbyId);
    if (!s) return undefined;
    const lease = await lockLease(db, p.id);
    let reason: string;
    let op: OperationRow | undefined;
    if (how.kind === "failover") {
      const decision: Decision = decideFailover({
        primary: primaryView(p, lease),
        standbys: (await standbysWithAgents(db, p.id)).map(standbyView),
        now,
        leaseSeconds: ctx.cfg.haLeaseSeconds,
        marginSeconds: ctx.cfg.haLeaseMarginSeconds,
        healthySince: how.healthySince,
        agentTimeoutSeconds: ctx.cfg.agentTimeoutSeconds,
      });
      if (!decision.failover || decision.to !== s.id) return undefined;
      reason = decision.reason;
    } else {
      if (p.switchover_to !== s.id || p.switchover_fenced_at === null || !p.fenced || BigInt(s.wal_position) < BigInt(p.wal_position)) {
        return undefined;
      }
      op = await runningFailover(db, p.id);
      reason = `planned switchover: the primary was fenced at WAL position ${p.wal_position} and the standby had received ${s.wal_position}`;
    }
    const from = p.node_id ?? p.id;
    // First: the database's row takes over the standby's port on its agent.
    await retire(db, s.id);
    await setStatus(db, s, PROMOTED);
    const moved = await moveToStandby(db, p.id, s, { at: now, reason, from });
    await setStatus(db, moved, TRANSITIONS.failover.to);
    if (op) {
      await retargetOperation(db, op.id, moved.generation, from, s.id);
      await db.query("UPDATE operations SET reason = $2 WHERE id = $1", [op.id, reason]);
    } else {
      op = await startOperation(db, p.id, "failover", moved.generation, { reason, from, to: s.id });
    }
    await insertDiscard(db, { agentId: p.agent_id, instanceId: p.id, port: p.port, operationId: op.id });
    await moveLease(db, p.id, s.agent_id, now, new Date(now.getTime() + ctx.cfg.haLeaseSeconds * 1000));
    await notifyAgent(db, p.agent_id);
    await notifyAgent(db, s.agent_id);
    // The other standbys and the replicas wait for the new primary's address (their specs say so now).
    for (const r of await lockLiveReplicas(db, p.id)) await notifyAgent(db, r.agent_id);
    return { from, fromAgent: p.agent_id, to: s.id, toAgent: s.agent_id, reason, operationId: op.id };
  });
  if (!done) return false;
  ctx.log.warn("failover: standby promoted", {
    database_id: primaryId,
    kind: how.kind,
    from: done.from,
    from_agent: done.fromAgent,
    to: done.to,
    to_agent: done.toAgent,
    reason: done.reason,
    operation_id: done.operationId,
  });
  // The name follows at once (the report that the new server runs publishes it again before it shows running).
  await publishRecord(ctx, primaryId).catch((err: unknown) =>
    ctx.log.warn("DNS record not moved yet; the report of the new primary retries", { database_id: primaryId, error: err }),
  );
  await replaceStandbys(ctx, primaryId).catch((err: unknown) =>
    ctx.log.warn("replacement standby not placed yet; the supervisor retries", { database_id: primaryId, error: err }),
  );
  return true;
}

/** Missing standbys of a primary placed where they fit (the supervisor's pass, after a failover). */
async function replaceStandbys(ctx: AppContext, primaryId: string): Promise<number> {
  return await withTransaction(ctx.pool, async (db) => {
    const { rows } = await db.query<DatabaseRow>("SELECT * FROM databases WHERE id = $1 AND primary_id IS NULL FOR UPDATE", [primaryId]);
    if (!rows[0]) return 0;
    return (await ensureStandbys(ctx, db, rows[0], false)).length;
  });
}

/**
 * Whether the supervisor may retire primary `p`'s lost standbys now: it has run its passes without a gap for
 * HA_STANDBY_REPLACE_AFTER_SECONDS (after its own outage, or the metadata database's, every agent looks silent:
 * they get that long to report again), and the primary runs on an agent heard from lately, meant to run (while
 * the primary is down, a standby that is only silent may be the way back: its host's return can promote it).
 */
function mayRetireLost(
  ctx: AppContext,
  p: Pick<DatabaseRow, "deleted_at" | "desired_state" | "status" | "switchover_to">,
  primaryAgentSeenAt: Date | undefined,
  healthySince: Date | undefined,
): boolean {
  const now = ctx.clock.now().getTime();
  if (healthySince === undefined || now - healthySince.getTime() < ctx.cfg.haStandbyReplaceAfterSeconds * 1000) return false;
  if (p.deleted_at !== null || p.desired_state !== "running" || p.status !== "running" || p.switchover_to !== null) return false;
  return primaryAgentSeenAt !== undefined && primaryAgentSeenAt.getTime() > now - ctx.cfg.agentTimeoutSeconds * 1000;
}

/** The standbys whose agent has not been heard from for more than HA_STANDBY_REPLACE_AFTER_SECONDS: their host is lost. */
function lostOf<T extends { agent_id: string }>(ctx: AppContext, standbys: readonly T[], lastSeen: (s: T) => Date | undefined): T[] {
  const since = ctx.clock.now().getTime() - ctx.cfg.haStandbyReplaceAfterSeconds * 1000;
  return standbys.filter((s) => (lastSeen(s)?.getTime() ?? 0) < since);
}

/**
 * Primary `primaryId`'s standbys on lost hosts (docs/decisions.md, "A standby's host lost"), checked again under
 * the rows' locks, in one transaction: each retired as a deleted standby is (purgeReplica: hidden, billed no more,
 * its slot and synchronous listing gone from the primary's spec, its data purged by its agent if that host ever
 * returns), the operation `standby_replaced` recorded on the primary with why, and a replacement placed on another
 * live host of the region apart from the primary and the other standbys (ensureStandbys; when none can take it,
 * a later pass places it and names it in the operation). Answers the standbys retired.
 */
export async function replaceLostStandbys(ctx: AppContext, primaryId: string, healthySince: Date | undefined): Promise<string[]> {
  const done = await withTransaction(ctx.pool, async (db) => {
    const locked = await lockPrimaryAndStandbys(db, primaryId);
    if (!locked) return undefined;
    const { p, standbys } = locked;
    const seen = await agentsLastSeen(db, [p.agent_id, ...standbys.map((s) => s.agent_id)]);
    if (!mayRetireLost(ctx, p, seen.get(p.agent_id), healthySince)) return undefined;
    const lost = lostOf(ctx, standbys, (s) => seen.get(s.agent_id));
    if (lost.length === 0) return undefined;
    const now = ctx.clock.now();
    const after = ctx.cfg.haStandbyReplaceAfterSeconds;
    for (const s of lost) {
      const lastSeen = seen.get(s.agent_id);
      const silent = lastSeen
        ? `not heard from since ${lastSeen.toISOString()} (${Math.floor((now.getTime() - lastSeen.getTime()) / 1000)} s)`
        : "gone";
      await purgeReplica(ctx, db, s);
      await recordStandbyReplaced(
        db,
        p.id,
        p.generation,
        `the standby ${s.id}'s host ${s.agent_id} was ${silent}, longer than the ${after} s a standby's host may be silent: ` +
          "the standby was retired (its data is removed if that host returns)",
        s.id,
      );
    }
    // The primary's spec drops the retired standbys' slots and synchronous names.
    await notifyAgent(db, p.agent_id);
    const placed = await ensureStandbys(ctx, db, p, false, new Set(lost.map((s) => s.agent_id)));
    if (placed.length < lost.length) {
      await notePendingReplacements(
        db,
        p.id,
        lost.map((s) => s.id),
        `; no other host of region ${p.region} can take a replacement now (live, with PostgreSQL ${p.version}, capacity left ` +
          `and port ${p.port} free, apart from the primary and the other standbys): the next standby placed for the database replaces it`,
      );
    }
    return { lost, placed };
  });
  if (!done) return [];
  for (const s of done.lost) {
    ctx.log.warn("standby's host lost: standby retired", { database_id: primaryId, standby_id: s.id, agent_id: s.agent_id });
  }
  if (done.placed.length < done.lost.length) {
    ctx.log.warn("no host for a lost standby's replacement yet; the supervisor retries", {
      database_id: primaryId,
      missing: done.lost.length - done.placed.length,
    });
  }
  return done.lost.map((s) => s.id);
}

/** A switchover called off: the primary unfenced (its lease renews again), its operation failed with why. */
async function abortSwitchover(ctx: AppContext, p: DatabaseRow, why: string, target?: SupervisedStandby): Promise<void> {
  await withTransaction(ctx.pool, async (db) => {
    const { rows } = await db.query<DatabaseRow>("SELECT * FROM databases WHERE id = $1 FOR UPDATE", [p.id]);
    if (!rows[0] || rows[0].switchover_to === null) return;
    await setSwitchover(db, p.id, null, null);
    const op = await runningFailover(db, p.id);
    if (op) await failOperation(db, op.id, why);
    await notifyAgent(db, rows[0].agent_id);
  });
  // What the decision saw: the two last reported positions and when they arrived (a called-off switchover's evidence).
  const at = (d: Date | null) => d?.toISOString() ?? "never";
  ctx.log.warn("switchover called off", {
    database_id: p.id,
    reason: why,
    primary_wal: p.wal_position,
    primary_wal_at: at(p.wal_position_at),
    primary_fenced: p.fenced,
    fenced_at: at(p.switchover_fenced_at),
    ...(target && { standby_id: target.id, standby_wal: target.wal_position, standby_wal_at: at(target.wal_position_at) }),
  });
}

/**
 * How far (bytes of WAL) a switchover's standby may trail before its primary is fenced: the pause clients see is the
 * time it takes to receive this much, then the promotion.
 */
export const SWITCHOVER_FENCE_LAG_BYTES = 1024 * 1024;
/** WAL positions older than this do not say how far the standby trails now. */
const FRESH_POSITION_MS = 5000;

/**
 * A switchover's next step. First, while the primary still takes writes: once the standby trails by at most
 * SWITCHOVER_FENCE_LAG_BYTES (both positions reported lately), the primary is fenced (its spec says so). Then, once
 * its agent reports it fenced with its WAL position and the standby has received all of it, the standby is
 * promoted. Not there within HA_SWITCHOVER_TIMEOUT_MS: called off.
 */
async function superviseSwitchover(ctx: AppContext, p: SupervisedPrimary, standbys: SupervisedStandby[]): Promise<void> {
  const target = standbys.find((s) => s.id === p.switchover_to);
  const now = ctx.clock.now().getTime();
  const started = p.switchover_started_at?.getTime() ?? 0;
  if (p.desired_state !== "running") return await abortSwitchover(ctx, p, `the database is meant to be ${p.desired_state} now`);
  if (target?.status !== "running") return await abortSwitchover(ctx, p, `the standby ${p.switchover_to} is no longer running`);
  const fresh = (at: Date | null) => at !== null && now - at.getTime() <= FRESH_POSITION_MS;
  if (p.switchover_fenced_at === null) {
    const close =
      fresh(p.wal_position_at) &&
      fresh(target.wal_position_at) &&
      BigInt(p.wal_position) - BigInt(target.wal_position) <= BigInt(SWITCHOVER_FENCE_LAG_BYTES);
    if (close) {
      await withTransaction(ctx.pool, async (db) => {
        await fenceForSwitchover(db, p.id, ctx.clock.now());
        await notifyAgent(db, p.agent_id);
      });
      ctx.log.info("switchover: the standby has nearly all the WAL; fencing the primary", { database_id: p.id, standby_id: target.id });
    } else if (now - started > ctx.cfg.haSwitchoverTimeoutMs) {
      await abortSwitchover(
        ctx,
        p,
        `the standby did not catch up within ${ctx.cfg.haSwitchoverTimeoutMs / 1000} s; the primary keeps running`,
        target,
      );
    }
    return;
  }
  const fencedAt = p.switchover_fenced_at.getTime();
  const caughtUp =
    p.fenced &&
    p.wal_position_at !== null &&
    p.wal_position_at.getTime() >= fencedAt &&
    target.wal_position_at !== null &&
    target.wal_position_at.getTime() >= p.wal_position_at.getTime() &&
    BigInt(target.wal_position) >= BigInt(p.wal_position);
  if (caughtUp) {
    await executeFailover(ctx, p.id, target.id, { kind: "switchover" });
    return;
  }
  if (now - started > ctx.cfg.haSwitchoverTimeoutMs) {
    const what = p.fenced ? "the standby did not receive all of the primary's WAL" : "the primary's agent did not report it fenced";
    await abortSwitchover(ctx, p, `${what} within ${ctx.cfg.haSwitchoverTimeoutMs / 1000} s; the primary keeps running`, target);
  }
}

/** What the supervisor keeps between passes: since when the control plane has heard renewals without a gap. */
export interface SupervisorState {
  healthySince: Date | undefined;
  lastPassAt: number | undefined;
  /** When each primary's missing standbys were last looked for (they are placed every few seconds, not every pass). */
  lastPlacement: Map<string, number>;
  /** Each primary's synchronous standbys as its agent was last told (those running on an agent heard from lately). */
  synchronous: Map<string, string>;
}

export function createSupervisorState(): SupervisorState {
  return { healthySince: undefined, lastPassAt: undefined, lastPlacement: new Map(), synchronous: new Map() };
}

/**
 * A primary's synchronous standbys follow its standbys' agents (watch-assignments.ts): one whose agent went silent
 * for a lease is left out, so a primary in synchronous mode does not wait for a lost host forever. When that set
 * changes, the primary's agent is told (its spec carries the new names).
 */
async function followSynchronousStandbys(ctx: AppContext, state: SupervisorState, p: SupervisedPrimary, standbys: SupervisedStandby[]) {
  if (!p.ha_synchronous) return;
  const since = ctx.clock.now().getTime() - ctx.cfg.haLeaseSeconds * 1000;
  const now = standbys
    .filter((s) => s.status === "running" && s.agent_last_seen_at.getTime() > since)
    .map((s) => s.id)
    .sort()
    .join();
  const before = state.synchronous.get(p.id);
  state.synchronous.set(p.id, now);
  if (before === undefined || before === now) return;
  ctx.log.warn("synchronous standbys changed", { database_id: p.id, standbys: now, before });
  await withTransaction(ctx.pool, (db) => notifyAgent(db, p.agent_id));
}

const PLACEMENT_EVERY_MS = 5000;

/**
 * One pass over the highly available databases: failovers due (decided by
 * failover-decision.ts, checked again under locks), switchovers' next steps,
 * standbys on lost hosts retired and replaced (replaceLostStandbys), missing
 * standbys placed. Serialized across instances of the service by an
 * advisory lock (singleton.ts: a pass that finds it taken is skipped). A pass that comes
 * long after the previous one, or after a failed one, starts the control
 * plane's "heard renewals since" anew: it may have missed them. Answers the
 * failovers made.
 */
export async function superviseHighAvailability(ctx: AppContext, state: SupervisorState): Promise<number> {
  const nowMs = ctx.clock.now().getTime();
  const gapMs = Math.max(3 * ctx.cfg.haSuperviseIntervalMs, 3000);
  if (state.lastPassAt === undefined || nowMs - state.lastPassAt > gapMs) state.healthySince = ctx.clock.now();
  state.lastPassAt = nowMs;
  let failovers = 0;
  try {
    await whileHolding(ctx.pool, "ha-supervisor", async () => {
      for (const p of await supervisedPrimaries(ctx.pool)) {
        const standbys = await standbysWithAgents(ctx.pool, p.id);
        if (p.switchover_to !== null) {
          await superviseSwitchover(ctx, p, standbys);
          continue;
        }
        const lease = p.lease_agent_id && p.lease_expires_at ? { agent_id: p.lease_agent_id, expires_at: p.lease_expires_at } : undefined;
        const decision = decideFailover({
          primary: primaryView(p, lease),
          standbys: standbys.map(standbyView),
          now: ctx.clock.now(),
          leaseSeconds: ctx.cfg.haLeaseSeconds,
          marginSeconds: ctx.cfg.haLeaseMarginSeconds,
          healthySince: state.healthySince,
          agentTimeoutSeconds: ctx.cfg.agentTimeoutSeconds,
        });
        if (decision.failover) {
          if (await executeFailover(ctx, p.id, decision.to, { kind: "failover", healthySince: state.healthySince })) failovers++;
          continue;
        }
        await followSynchronousStandbys(ctx, state, p, standbys);
        const lost = mayRetireLost(ctx, p, p.agent_last_seen_at, state.healthySince)
          ? lostOf(ctx, standbys, (s) => s.agent_last_seen_at)
          : [];
        if (lost.length > 0 && (await replaceLostStandbys(ctx, p.id, state.healthySince)).length > 0) {
          // Their replacements were looked for in the same transaction.
          state.lastPlacement.set(p.id, nowMs);
          continue;
        }
        const last = state.lastPlacement.get(p.id) ?? 0;
        if (standbys.length !== p.ha_standbys && nowMs - last >= PLACEMENT_EVERY_MS) {
          state.lastPlacement.set(p.id, nowMs);
          const added = await replaceStandbys(ctx, p.id);
          if (added > 0) ctx.log.info("standbys placed", { database_id: p.id, count: added });
        }
      }
    });
  } catch (err) {
    // The metadata database (or this process) may have missed renewals meanwhile.
    state.healthySince = undefined;
    state.lastPassAt = undefined;
    throw err;
  }
  return failovers;
}
