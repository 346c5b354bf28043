import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { notFound, untraced } from "@dbaas/kit";
import {
  DesiredState,
  InstanceSpecSchema,
  ReplicaSourceSchema,
  RestoreSourceSchema,
  WatchAssignmentsResponseSchema,
  type WatchAssignmentsRequest,
  type WatchAssignmentsResponse,
} from "@dbaas/proto/agent";
import type { AppContext } from "../context.ts";
import { agentExists } from "../db/agents.ts";
import { assignedTo, type AssignedRow } from "../db/databases.ts";
import { hostOf } from "../mappers.ts";
import { slotName } from "../replicas.ts";
import type { DesiredState as StoredDesiredState } from "../statuses.ts";

const DESIRED: Record<StoredDesiredState, DesiredState> = {
  running: DesiredState.RUNNING,
  stopped: DesiredState.STOPPED,
  deleted: DesiredState.DELETED,
  purged: DesiredState.PURGED,
};

/**
 * A replica's source: its primary's replication endpoint and CA, its slot,
 * and its seed once that backup completed (until then the agent waits).
 */
function replicaSource(r: AssignedRow, domain: string) {
  if (r.primary_id === null) return undefined;
  return create(ReplicaSourceSchema, {
    primaryDatabaseId: r.primary_id,
    seedBackupId: r.seed_ready ? (r.seed_backup_id ?? "") : "",
    primaryAddress: r.primary_address ?? "",
    primaryPort: r.primary_port ?? 0,
    primaryHost: hostOf(r.primary_id, domain),
    primaryCaPem: r.primary_ca_pem ?? "",
    slotName: slotName(r.id),
    primaryVersion: r.version,
  });
}

/** How often a watch stream re-sends unchanged state: a keepalive and a safety net for lost notifications. */
const RESEND_MS = 15_000;

/**
 * The agent's desired state: a snapshot of every instance it is to run, sent
 * at once and again after each change (woken by the change feed), or every
 * RESEND_MS regardless. Each spec carries the trace context of the request
 * that last changed it, and what replication needs: a replica's source, a
 * primary's slots, a promoted database's adopted instance.
 */
export function watchAssignments(ctx: AppContext) {
  const snapshot = async (agentId: string): Promise<WatchAssignmentsResponse> => {
    const rows = await assignedTo(ctx.pool, agentId);
    return create(WatchAssignmentsResponseSchema, {
      instances: rows.map((r) =>
        create(InstanceSpecSchema, {
          databaseId: r.id,
          version: r.version,
          tier: r.tier,
          port: r.port,
          desiredState: DESIRED[r.desired_state],
          scramVerifier: r.scram_verifier,
          generation: BigInt(r.generation),
          credentialsGeneration: BigInt(r.credentials_generation),
          host: hostOf(r.id, ctx.cfg.databaseDomain),
          restoreSource:
            r.restored_from_id && r.restore_time
              ? create(RestoreSourceSchema, { databaseId: r.restored_from_id, restoreTime: timestampFromDate(r.restore_time) })
              : undefined,
          backupIds: r.backup_ids,
          traceContext: r.spec_trace_context,
          replicaOf: replicaSource(r, ctx.cfg.databaseDomain),
          replicationSlots: r.replica_ids.map(slotName),
          adoptInstanceId: r.adopt_instance_id ?? "",
        }),
      ),
    });
  };

  return async function* (req: WatchAssignmentsRequest, handlerCtx: HandlerContext): AsyncGenerator<WatchAssignmentsResponse> {
    if (!(await agentExists(ctx.pool, req.agentId))) throw notFound("agent (register first)");
    let dirty = true;
    let wake: () => void = () => {};
    const unsubscribe = ctx.feed.onAgent(req.agentId, () => {
      dirty = true;
      wake();
    });
    // Also on abort: a stream suspended at a yield the client never pulls would otherwise keep its subscription.
    const onAbort = () => {
      unsubscribe();
      wake();
    };
    handlerCtx.signal.addEventListener("abort", onAbort);
    try {
      while (!handlerCtx.signal.aborted) {
        if (dirty) {
          dirty = false;
          // The stream's own work, in no request's trace (its server span ended when the stream opened).
          yield await untraced(() => snapshot(req.agentId));
        }
        await new Promise<void>((resolve) => {
          // A change noted while the last snapshot was being built or delivered: send again now.
          if (dirty || handlerCtx.signal.aborted) return resolve();
          const timer = setTimeout(() => {
            dirty = true;
            resolve();
          }, RESEND_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    } finally {
      unsubscribe();
      handlerCtx.signal.removeEventListener("abort", onAbort);
    }
  };
}
