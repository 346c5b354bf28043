import { Code, ConnectError } from "@connectrpc/connect";
import { conflict, newId, notFound, withTransaction, withTransactionRetried } from "@dbaas/kit";
import { requireGoodStanding } from "@dbaas/catalogue";
import type pg from "pg";
import { requireAllowance } from "./allowance.ts";
import type { AppContext } from "./context.ts";
import { insertBackup } from "./db/backups.ts";
import { insertDatabase, lockOwned, markDeleted, nameTaken, setStatus, updateSpec, type DatabaseRow } from "./db/databases.ts";
import { notifyAgent, notifyPrimaryAgent } from "./db/notify.ts";
import { finishOperations, startBackupOperation, startOperation } from "./db/operations.ts";
import {
  assignSeed,
  clearSeed,
  countLiveReplicas,
  lockLiveReplicas,
  lockPrimary,
  lockReplica,
  lockUnseeded,
  markSeedReady,
  replicaNameTaken,
  resetSeed,
  retire,
  seedStatus,
  setReplicationEndpoint,
} from "./db/replicas.ts";
import { TRANSITIONS, transitionFrom } from "./lifecycle.ts";
import { placeDatabase } from "./placement.ts";
import { DELETED, PROMOTED } from "./statuses.ts";
import { removeStaleRecordsSoon } from "./dns/records.ts";

/** Live replicas a database may have (docs/product.md, Read replicas). */
export const MAX_REPLICAS = 5;
/** Seed backups requested for a replica before it is failed. */
export const SEED_ATTEMPTS = 3;

/** The physical replication slot on the primary a replica streams from: "dbaas_" + its id, in slot-name characters. */
export function slotName(replicaId: string): string {
  return `dbaas_${replicaId.replace(/[^a-z0-9_]/g, "_")}`;
}

export interface NewReplica {
  organizationId: string;
  primaryId: string;
  /** Validated (validateNewDatabase), defaults applied. */
  name: string;
  region: string;
  tier: string;
}

/**
 * A read replica of the organization's running database: placed like a
 * database, with the primary's version and credentials, provisioning until its
 * agent reports it streaming. It costs money, so it needs the organization's
 * good standing whatever the free allowance. Its seed backup is requested in
 * the same transaction (or once a backup already running ends).
 */
export async function provisionReplica(ctx: AppContext, n: NewReplica): Promise<DatabaseRow> {
  try {
    // Run again on a deadlock or serialization failure: the primary and its unseeded replicas are locked here and by
    // a backup's report (reconcileSeeds) at once; a fresh-clone CI's second replica create met that as a 503. Safe to
    // repeat: the only call out is billing's good-standing read, and the ids are new each time.
    return await withTransactionRetried(ctx.pool, async (db) => {
      const primary = await lockOwned(db, n.organizationId, n.primaryId);
      transitionFrom("replicate", primary.status);
      if ((await countLiveReplicas(db, primary.id)) >= MAX_REPLICAS) {
        throw conflict(`a database has at most ${MAX_REPLICAS} replicas; delete one first`);
      }
      await requireGoodStanding(ctx.billing, ctx.log, n.organizationId, "run a read replica");
      const placement = await placeDatabase(db, {
        region: n.region,
        version: primary.version,
        timeoutSeconds: ctx.cfg.agentTimeoutSeconds,
        now: ctx.clock.now(),
      });
      const { to: status, desired } = TRANSITIONS.create;
      const created = await insertDatabase(db, {
        id: newId("rep"),
        organizationId: n.organizationId,
        name: n.name,
        region: n.region,
        tier: n.tier,
        version: primary.version,
        status,
        desired,
        agentId: placement.agentId,
        port: placement.port,
        // Never applied by the agent (a standby's roles arrive by replication); a promote takes the primary's current one.
        scramVerifier: primary.scram_verifier,
        primaryId: primary.id,
      });
      await setStatus(db, created, status);
      await startOperation(db, created.id, "create", created.generation);
      await notifyAgent(db, created.agent_id);
      // The primary's spec lists the new slot.
      await notifyAgent(db, primary.agent_id);
      await reconcileSeeds(ctx, db, primary);
      ctx.log.info("replica created", { database_id: primary.id, replica_id: created.id, agent_id: created.agent_id, port: created.port });
      return created;
    });
  } catch (err) {
    if (replicaNameTaken(err)) throw new ConnectError(`the database already has a replica named "${n.name}"`, Code.AlreadyExists);
    throw err;
  }
}

/**
 * Brings the seeds of the primary's replicas (the primary locked by the
 * caller) up to date with its backups: a completed seed goes into the
 * replica's spec (a new generation); a failed or vanished one is requested
 * again, up to SEED_ATTEMPTS, then the replica is failed with the reason.
 * Replicas without a seed get one backup requested for them all while the
 * primary runs — unless a backup is running already: that one may have
 * started before their slots existed, so they wait for it to end (each
 * backup report and schedule pass comes back here).
 */
export async function reconcileSeeds(ctx: AppContext, db: pg.ClientBase, primary: DatabaseRow): Promise<void> {
  const waiting: DatabaseRow[] = [];
  for (const r of await lockUnseeded(db, primary.id, SEED_ATTEMPTS)) {
    if (r.seed_backup_id !== null) {
      const seed = await seedStatus(db, r.seed_backup_id);
      if (seed?.status === "running") continue;
      if (seed?.status === "completed") {
        await markSeedReady(db, r.id);
        await updateSpec(db, r.id, {});
        await notifyAgent(db, r.agent_id);
        continue;
      }
      await clearSeed(db, r.id);
      if (r.seed_attempts >= SEED_ATTEMPTS) {
        const why = seed ? seed.failure_reason : "the backup was removed before it completed";
        const reason = `could not seed the replica: the primary's base backup failed ${SEED_ATTEMPTS} times (last: ${why})`;
        ctx.log.warn("replica seeding gave up", { replica_id: r.id, database_id: primary.id, reason });
        await setStatus(db, r, "failed", reason);
        await finishOperations(db, r.id, r.generation, reason);
        continue;
      }
    }
    waiting.push(r);
  }
  if (waiting.length === 0 || primary.status !== "running" || primary.desired_state !== "running") return;
  const backup = await insertBackup(db, { id: newId("bkp"), databaseId: primary.id, type: "manual", startedAt: ctx.clock.now() });
  if (!backup) return;
  await assignSeed(
    db,
    waiting.map((r) => r.id),
    backup.id,
  );
  await startBackupOperation(db, primary.id, backup.id, primary.generation);
  await notifyAgent(db, primary.agent_id);
}

/**
 * Replica (or standby) `row`, which its agent reports it stopped because it can never follow its primary's
 * timeline or finds the WAL it needs gone there (`reason`: what its server logged), is seeded again
 * (docs/decisions.md, "A replica that cannot follow the new primary is re-seeded"): its seed is taken away (a new generation: its agent discards the data and waits
 * for the new one) with its attempts counted afresh, and it shows provisioning until it runs again. Answers whether
 * it did (a replica not seeded yet, or not meant to run, is left alone); the caller then has the primary asked for
 * the seed ({@link reconcileSeedsOf}).
 */
export async function requestReseed(ctx: AppContext, db: pg.ClientBase, row: DatabaseRow, reason: string): Promise<boolean> {
  if (row.primary_id === null || !row.seed_ready || row.desired_state !== "running" || row.deleted_at !== null) return false;
  await resetSeed(db, row.id);
  const updated = await updateSpec(db, row.id, {});
  await setStatus(db, updated, "provisioning", `${reason}; seeding it again from its primary`);
  await notifyAgent(db, row.agent_id);
  // A standby leaves its primary's synchronous standbys.
  if (row.standby) await notifyPrimaryAgent(db, row.primary_id);
  ctx.log.warn("replica cannot follow its primary; seeding it again", {
    replica_id: row.id,
    database_id: row.primary_id,
    reason,
  });
  return true;
}

/** {@link reconcileSeeds} of primary `primaryId` in a transaction of its own (nothing when it is gone). */
export async function reconcileSeedsOf(ctx: AppContext, primaryId: string): Promise<void> {
  await withTransaction(ctx.pool, async (db) => {
    const primary = await lockPrimary(db, primaryId);
    if (primary) await reconcileSeeds(ctx, db, primary);
  });
}

/**
 * The primary's stop or start reaches its live replicas in the caller's
 * transaction: each not already converging there gets the same transition
 * (its own operation). A replica whose seeding failed for good stays failed:
 * there is nothing to start.
 */
export async function coupleReplicas(db: pg.ClientBase, primaryId: string, op: "start" | "stop"): Promise<void> {
  const t = TRANSITIONS[op];
  for (const r of await lockLiveReplicas(db, primaryId)) {
    if (r.desired_state === t.desired) continue;
    if (!r.seed_ready && r.seed_backup_id === null && r.seed_attempts >= SEED_ATTEMPTS) continue;
    const updated = await updateSpec(db, r.id, { desired: t.desired });
    await setStatus(db, updated, t.to);
    await startOperation(db, r.id, op, updated.generation);
    await notifyAgent(db, r.agent_id);
  }
}

/** A replica (or standby) deleted: hidden at once, its instance purged at once (a copy needs no retention), its slot gone from the primary's spec. */
export async function purgeReplica(ctx: AppContext, db: pg.ClientBase, r: DatabaseRow): Promise<void> {
  const deleted = await markDeleted(db, r.id, "purged", ctx.clock.now(), 0);
  await setStatus(db, deleted, DELETED);
  await startOperation(db, r.id, "delete", deleted.generation);
  await notifyAgent(db, r.agent_id);
}

/** A deleted primary's replicas go with it, in the caller's transaction. */
export async function purgeReplicasOf(ctx: AppContext, db: pg.ClientBase, primaryId: string): Promise<void> {
  for (const r of await lockLiveReplicas(db, primaryId)) await purgeReplica(ctx, db, r);
}

/** The organization's replica `replicaId` of its database `primaryId`, deleted (from any status). */
export async function removeReplica(ctx: AppContext, orgId: string, primaryId: string, replicaId: string): Promise<void> {
  await withTransactionRetried(ctx.pool, async (db) => {
    const primary = await lockOwned(db, orgId, primaryId);
    const replica = await lockReplica(db, primary.id, replicaId);
    if (!replica) throw notFound("replica");
    await purgeReplica(ctx, db, replica);
    await notifyAgent(db, primary.agent_id);
  });
  await removeStaleRecordsSoon(ctx);
  ctx.log.info("replica deleted", { database_id: primaryId, replica_id: replicaId });
}

/**
 * A running replica made an independent database, in one transaction: a new
 * "db-" record with the replica's name, tier, region, agent and port and the
 * primary's version and credentials, starting until its agent (which takes
 * over the replica's instance: adopt_instance_id) reports it running; the
 * replica retired. A name a live database of the organization has is
 * ALREADY_EXISTS. Counts against the free allowance like a create.
 */
export async function promoteReplica(ctx: AppContext, orgId: string, primaryId: string, replicaId: string): Promise<DatabaseRow> {
  let name = "";
  try {
    const row = await withTransactionRetried(ctx.pool, async (db) => {
      const primary = await lockOwned(db, orgId, primaryId);
      const replica = await lockReplica(db, primary.id, replicaId);
      if (!replica) throw notFound("replica");
      name = replica.name;
      const t = transitionFrom("promote", replica.status, "replica");
      await requireAllowance(db, ctx.billing, ctx.log, orgId, { tier: replica.tier });
      // First: the new database takes over the replica's port.
      await retire(db, replica.id);
      await setStatus(db, replica, PROMOTED);
      const status = t.to!;
      const created = await insertDatabase(db, {
        id: newId("db"),
        organizationId: orgId,
        name: replica.name,
        region: replica.region,
        tier: replica.tier,
        version: primary.version,
        status,
        desired: t.desired!,
        agentId: replica.agent_id,
        port: replica.port,
        scramVerifier: primary.scram_verifier,
        adoptInstanceId: replica.id,
      });
      await setStatus(db, created, status);
      await startOperation(db, created.id, "promote", created.generation);
      await notifyAgent(db, created.agent_id);
      // The primary's spec drops the slot.
      await notifyAgent(db, primary.agent_id);
      return created;
    });
    // The replica's name goes; the new database's is published before it runs.
    await removeStaleRecordsSoon(ctx);
    ctx.log.info("replica promoted", { database_id: primaryId, replica_id: replicaId, promoted_id: row.id });
    return row;
  } catch (err) {
    if (nameTaken(err)) throw new ConnectError(`a database named "${name}" already exists; rename it first`, Code.AlreadyExists);
    throw err;
  }
}

/**
 * A primary's reported replication endpoint, recorded; when it moved, its
 * live replicas get a new generation (their agents restart them with the new
 * conninfo).
 */
export async function recordReplicationEndpoint(db: pg.ClientBase, row: DatabaseRow, address: string, port: number): Promise<void> {
  if (port <= 0 || address === "") return;
  if (!(await setReplicationEndpoint(db, row.id, address, port))) return;
  if (row.primary_id !== null) return;
  for (const r of await lockLiveReplicas(db, row.id)) {
    await updateSpec(db, r.id, {});
    await notifyAgent(db, r.agent_id);
  }
}
