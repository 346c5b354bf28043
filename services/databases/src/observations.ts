import { withTransaction } from "@dbaas/kit";
import { ObservedState, type InstanceObservation } from "@dbaas/proto/agent";
import type { AppContext } from "./context.ts";
import { deleteBackupsOf } from "./db/backups.ts";
import { recordConfigObserved } from "./db/config.ts";
import { lockHosted, recordObserved, setStatus } from "./db/databases.ts";
import { recordWal } from "./db/high-availability.ts";
import { notifyPrimaryAgent, notifyReported } from "./db/notify.ts";
import { recordCurrent, type PublishedRecord } from "./dns/records.ts";
import { finishOperations } from "./db/operations.ts";
import { onReport } from "./lifecycle.ts";
import { reconcileSeedsOf, recordReplicationEndpoint, requestReseed } from "./replicas.ts";

/**
 * Applies what agent `agentId` observed of one of its instances: the
 * generations it applied (waking a reset-password that waits for the
 * credentials), and, for the current spec only, what the lifecycle makes of
 * the observed state (lifecycle.ts `onReport`). A report about a database
 * another agent hosts is ignored. A purge confirmed takes the database's
 * backup records with it (the agent removed them from the blob store first).
 * Where a running instance listens for replication is recorded (a primary's
 * move reaches its replicas' specs).
 *
 * With DNS records kept (DNS_PROVIDER=rfc2136) a database moves to running
 * only with `published`, its record as the server confirmed it, still
 * current: without it the report changes no status and answers
 * "awaiting-record" (the caller publishes, then applies the report again).
 * Answers "running" when the report moved the database to running.
 */
export async function applyObservation(
  ctx: AppContext,
  agentId: string,
  obs: InstanceObservation,
  published?: PublishedRecord,
): Promise<"running" | "awaiting-record" | undefined> {
  /** A replica to be seeded again: its primary is asked for the seed once this transaction has committed. */
  let reseedOf: string | undefined;
  const outcome = await withTransaction(ctx.pool, async (db) => {
    const row = await lockHosted(db, agentId, obs.databaseId);
    if (!row) return undefined;
    const credentialsAdvanced = obs.appliedCredentialsGeneration > BigInt(row.applied_credentials_generation);
    await recordObserved(db, row.id, obs.appliedCredentialsGeneration, obs.observedGeneration);
    const configAdvanced = await recordConfigObserved(db, row.id, obs.appliedConfigGeneration, obs.pendingRestart);
    // Wakes a reset-password or a configuration change waiting for the agent's confirmation.
    if (credentialsAdvanced || configAdvanced) await notifyReported(db, row.id);
    await recordReplicationEndpoint(db, row, obs.replicationAddress, obs.replicationPort);
    // Failover compares standbys' WAL; a switchover waits for the primary's agent to report it fenced.
    await recordWal(db, row.id, obs.walPosition, obs.fenced, ctx.clock.now());
    // An observation of an older spec says nothing about the current one.
    if (obs.observedGeneration < BigInt(row.generation)) return undefined;
    // A replica that can never follow its primary (the agent stopped it): a new seed, from the primary.
    if (obs.reseed) {
      if (await requestReseed(ctx, db, row, obs.message)) reseedOf = row.primary_id ?? undefined;
      return undefined;
    }

    const outcome = onReport({ ...row, deleted: row.deleted_at !== null }, obs.state, obs.message);
    // Never running while its name resolves nowhere (or somewhere else). A standby has no name.
    if (outcome.status?.status === "running" && ctx.dns && !row.standby && !(await recordCurrent(db, row, published)))
      return "awaiting-record";
    if (outcome.status) await setStatus(db, row, outcome.status.status, outcome.status.reason);
    // A standby that starts or stops streaming joins or leaves its primary's synchronous standbys.
    if (outcome.status && row.standby && row.primary_id) await notifyPrimaryAgent(db, row.primary_id);
    if (outcome.settle !== undefined) await finishOperations(db, row.id, row.generation, outcome.settle);
    if (obs.state === ObservedState.PURGED && row.desired_state === "purged") await deleteBackupsOf(db, row.id);
    return outcome.status?.status === "running" ? "running" : undefined;
  });
  // Apart: the primary is locked before its replicas everywhere else.
  if (reseedOf) await reconcileSeedsOf(ctx, reseedOf);
  return outcome;
}
