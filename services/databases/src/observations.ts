import { withTransaction } from "@dbaas/kit";
import { ObservedState, type InstanceObservation } from "@dbaas/proto/agent";
import type { AppContext } from "./context.ts";
import { deleteBackupsOf } from "./db/backups.ts";
import { lockHosted, recordObserved, setStatus } from "./db/databases.ts";
import { notifyReported } from "./db/notify.ts";
import { finishOperations } from "./db/operations.ts";
import { onReport } from "./lifecycle.ts";
import { recordReplicationEndpoint } from "./replicas.ts";

/**
 * Applies what agent `agentId` observed of one of its instances: the
 * generations it applied (waking a reset-password that waits for the
 * credentials), and, for the current spec only, what the lifecycle makes of
 * the observed state (lifecycle.ts `onReport`). A report about a database
 * another agent hosts is ignored. A purge confirmed takes the database's
 * backup records with it (the agent removed them from the blob store first).
 * Where a running instance listens for replication is recorded (a primary's
 * move reaches its replicas' specs).
 * Answers whether the report moved the database to running.
 */
export async function applyObservation(ctx: AppContext, agentId: string, obs: InstanceObservation): Promise<boolean> {
  return await withTransaction(ctx.pool, async (db) => {
    const row = await lockHosted(db, agentId, obs.databaseId);
    if (!row) return false;
    const credentialsAdvanced = obs.appliedCredentialsGeneration > BigInt(row.applied_credentials_generation);
    await recordObserved(db, row.id, obs.appliedCredentialsGeneration, obs.observedGeneration);
    if (credentialsAdvanced) await notifyReported(db, row.id);
    await recordReplicationEndpoint(db, row, obs.replicationAddress, obs.replicationPort);
    // An observation of an older spec says nothing about the current one.
    if (obs.observedGeneration < BigInt(row.generation)) return false;

    const outcome = onReport({ ...row, deleted: row.deleted_at !== null }, obs.state, obs.message);
    if (outcome.status) await setStatus(db, row, outcome.status.status, outcome.status.reason);
    if (outcome.settle !== undefined) await finishOperations(db, row.id, row.generation, outcome.settle);
    if (obs.state === ObservedState.PURGED && row.desired_state === "purged") await deleteBackupsOf(db, row.id);
    return outcome.status?.status === "running";
  });
}
