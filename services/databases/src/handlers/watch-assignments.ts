import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { notFound, untraced } from "@dbaas/kit";
import {
  DesiredState,
  HeldSlotSchema,
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
import { agentPooling, DEFAULT_POOLER, poolersOf, trustedSourcesOf } from "../db/edge.ts";
import { poolerSpec, trustedSourceSpecs } from "../edge.ts";
import { discardsOf } from "../db/high-availability.ts";
import { replicaParameters } from "../inside/config.ts";
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

/**
 * A highly available primary's synchronous_standby_names: any one of its
 * standbys that stream now must have a commit's WAL before the commit
 * returns. None streaming (after a failover, until the replacement is
 * seeded): commits do not wait — the primary keeps taking writes alone rather
 * than stopping, as Patroni's non-strict synchronous mode does.
 */
export function synchronousStandbyNames(r: Pick<AssignedRow, "ha_synchronous" | "running_standby_ids">): string {
  if (!r.ha_synchronous || r.running_standby_ids.length === 0) return "";
  return `ANY 1 (${r.running_standby_ids.map((id) => `"${id}"`).join(", ")})`;
}

/** Since when a standby's agent must have been heard from for the standby to count as synchronous: a lease ago. */
export const synchronousStandbysLiveSince = (ctx: AppContext) => new Date(ctx.clock.now().getTime() - ctx.cfg.haLeaseSeconds * 1000);

/** How often a watch stream re-sends unchanged state: a keepalive and a safety net for lost notifications. */
const RESEND_MS = 15_000;

/**
 * The agent's desired state: a snapshot of every instance it is to run, sent
 * at once and again after each change (woken by the change feed), or every
 * RESEND_MS regardless. Each spec carries the trace context of the request
 * that last changed it, and what replication needs: a replica's source, a
 * primary's slots, a promoted database's adopted instance; and high
 * availability's: whether a primary needs its lease, its synchronous
 * standbys, a switchover's fencing, the old primaries to discard.
 */
export function watchAssignments(ctx: AppContext) {
  const snapshot = async (agentId: string): Promise<WatchAssignmentsResponse> => {
    // A standby whose agent went silent is no synchronous standby: a primary waiting for it would stop taking writes.
    const rows = await assignedTo(ctx.pool, agentId, synchronousStandbysLiveSince(ctx));
    // A replica admits whom its primary admits; only primaries run a pooler.
    const edgeOf = (r: AssignedRow) => r.primary_id ?? r.id;
    const [trusted, poolers, pooling] = await Promise.all([
      trustedSourcesOf(ctx.pool, [...new Set(rows.map(edgeOf))], ctx.clock.now()),
      poolersOf(
        ctx.pool,
        rows.map((r) => r.id),
      ),
      agentPooling(ctx.pool, agentId),
    ]);
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
          readOnly: r.storage_full,
          trustedSources: trustedSourceSpecs(trusted.get(edgeOf(r)) ?? []),
          pooler: poolerSpec(r, poolers.get(r.id) ?? DEFAULT_POOLER, pooling.pooler_port_offset, ctx.cfg.databaseDomain),
          standby: r.standby,
          leaseRequired: r.primary_id === null && r.ha_standbys > 0 && r.desired_state === "running",
          synchronousStandbyNames: r.primary_id === null ? synchronousStandbyNames(r) : "",
          fenced: r.switchover_fenced_at !== null,
          parameters: r.primary_id === null ? r.config_parameters : replicaParameters(r.config_parameters, r.tier),
          configGeneration: BigInt(r.config_generation),
          standbySlots: r.sibling_positions.map((m) => create(HeldSlotSchema, { name: slotName(m.id), position: BigInt(m.position) })),
        }),
      ),
      discardInstanceIds: await discardsOf(ctx.pool, agentId),
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
