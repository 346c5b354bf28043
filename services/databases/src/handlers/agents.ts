import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Validator, notFound, withTransaction } from "@dbaas/kit";
import {
  AgentService,
  DesiredState,
  InstanceSpecSchema,
  ObservedState,
  WatchAssignmentsResponseSchema,
  type InstanceObservation,
} from "@dbaas/proto/agent";
import { DATABASE_CHANNEL, notify } from "../change-feed.ts";
import type { AppContext } from "../context.ts";
import { finishOperations, hostOf, setStatus, type DatabaseRow } from "../records.ts";

const DESIRED: Record<string, DesiredState> = {
  running: DesiredState.RUNNING,
  stopped: DesiredState.STOPPED,
  deleted: DesiredState.DELETED,
  purged: DesiredState.PURGED,
};

/** How often a watch stream re-sends unchanged state: a keepalive and a safety net for lost notifications. */
const RESEND_MS = 15_000;

export function agentHandlers(ctx: AppContext): ServiceImpl<typeof AgentService> {
  const snapshot = async (agentId: string) => {
    // Purged instances whose purge the agent confirmed are history; everything else is desired state.
    const { rows } = await ctx.pool.query<DatabaseRow>(
      `SELECT * FROM databases WHERE agent_id = $1
         AND NOT (desired_state = 'purged' AND observed_generation >= generation)
       ORDER BY id`,
      [agentId],
    );
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
        }),
      ),
    });
  };

  return {
    async registerAgent(req) {
      const v = new Validator();
      if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(req.agentId)) v.add("agent_id", "must be a lowercase DNS label");
      if (req.regions.length === 0) v.add("regions", "at least one region is required");
      if (req.capacity < 0) v.add("capacity", "must not be negative");
      if (req.portRangeStart < 1024 || req.portRangeEnd > 65535 || req.portRangeEnd < req.portRangeStart) {
        v.add("port_range_start", "port range must lie within 1024-65535");
      }
      if (req.versions.length === 0) v.add("versions", "at least one version is required");
      if (!req.caCertificatePem.includes("BEGIN CERTIFICATE")) v.add("ca_certificate_pem", "must be a PEM certificate");
      v.throwIfAny();
      await ctx.pool.query(
        `INSERT INTO agents (id, regions, capacity, port_range_start, port_range_end, versions, ca_certificate_pem)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO UPDATE SET regions = $2, capacity = $3, port_range_start = $4, port_range_end = $5,
           versions = $6, ca_certificate_pem = $7, last_seen_at = now()`,
        [req.agentId, req.regions, req.capacity, req.portRangeStart, req.portRangeEnd, req.versions, req.caCertificatePem],
      );
      ctx.log.info("agent registered", { agent_id: req.agentId, regions: req.regions, capacity: req.capacity });
      return {};
    },

    async *watchAssignments(req, handlerCtx) {
      const known = await ctx.pool.query("SELECT 1 FROM agents WHERE id = $1", [req.agentId]);
      if (known.rowCount === 0) throw notFound("agent (register first)");
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
            yield await snapshot(req.agentId);
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
    },

    async reportInstances(req) {
      const seen = await ctx.pool.query("UPDATE agents SET last_seen_at = now() WHERE id = $1", [req.agentId]);
      if (seen.rowCount === 0) throw notFound("agent (register first)");
      for (const obs of req.instances) {
        await applyObservation(ctx, req.agentId, obs);
      }
      return {};
    },
  };
}

/**
 * The only place a database leaves a transitional status: when its agent has
 * observed the real instance in the desired state for the current spec.
 */
async function applyObservation(ctx: AppContext, agentId: string, obs: InstanceObservation): Promise<void> {
  await withTransaction(ctx.pool, async (db) => {
    const { rows } = await db.query<DatabaseRow>(
      "SELECT * FROM databases WHERE id = $1 AND agent_id = $2 FOR UPDATE",
      [obs.databaseId, agentId],
    );
    const row = rows[0];
    if (!row) return;
    const credentialsAdvanced = obs.appliedCredentialsGeneration > BigInt(row.applied_credentials_generation);
    await db.query(
      `UPDATE databases SET applied_credentials_generation = GREATEST(applied_credentials_generation, $2),
         observed_generation = GREATEST(observed_generation, $3) WHERE id = $1`,
      [row.id, String(obs.appliedCredentialsGeneration), String(obs.observedGeneration)],
    );
    if (credentialsAdvanced) await notify(db, DATABASE_CHANNEL, row.id);
    // An observation of an older spec says nothing about the current one.
    if (obs.observedGeneration < BigInt(row.generation)) return;

    const generation = row.generation;
    switch (obs.state) {
      case ObservedState.RUNNING:
        if (row.desired_state === "running" && row.status !== "running") {
          await setStatus(db, row, "running");
          await finishOperations(db, row.id, generation);
        }
        break;
      case ObservedState.STOPPED:
        if (row.desired_state === "stopped" && row.status !== "stopped") {
          await setStatus(db, row, "stopped");
          await finishOperations(db, row.id, generation);
        } else if (row.desired_state === "deleted") {
          await finishOperations(db, row.id, generation);
        }
        break;
      case ObservedState.PURGED:
        if (row.desired_state === "purged") await finishOperations(db, row.id, generation);
        break;
      case ObservedState.FAILED:
        if (row.deleted_at === null && (row.status !== "failed" || row.status_reason !== obs.message)) {
          await setStatus(db, row, "failed", obs.message || "the instance failed");
        }
        await finishOperations(db, row.id, generation, obs.message || "the instance failed");
        break;
      default:
        break;
    }
  });
}
