import { isIP } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Validator, notFound, withTransaction } from "@dbaas/kit";
import {
  ObservedState,
  RenewLeasesResponseSchema,
  type RegisterAgentRequest,
  type RenewLeasesRequest,
  type RenewLeasesResponse,
  type ReportBackupsRequest,
  type ReportInstancesRequest,
} from "@dbaas/proto/agent";
import { scheduleBackups } from "../backup-schedule.ts";
import { applyBackupReport } from "../backups.ts";
import type { AppContext } from "../context.ts";
import { setAgentPooling } from "../db/edge.ts";
import { touchAgent, upsertAgent } from "../db/agents.ts";
import { confirmDiscard, renewLeases as renew } from "../db/high-availability.ts";
import { publishBeforeRunning, republishAgent } from "../dns/records.ts";
import { applyObservation } from "../observations.ts";

/** An agent announcing itself (again, after each start): its regions, capacity, ports, versions and CA. */
export function registerAgent(ctx: AppContext) {
  return async (req: RegisterAgentRequest) => {
    const v = new Validator();
    if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(req.agentId)) v.add("agent_id", "must be a lowercase DNS label");
    if (req.regions.length === 0) v.add("regions", "at least one region is required");
    if (req.capacity < 0) v.add("capacity", "must not be negative");
    if (req.portRangeStart < 1024 || req.portRangeEnd > 65535 || req.portRangeEnd < req.portRangeStart) {
      v.add("port_range_start", "port range must lie within 1024-65535");
    }
    if (req.versions.length === 0) v.add("versions", "at least one version is required");
    if (!req.caCertificatePem.includes("BEGIN CERTIFICATE")) v.add("ca_certificate_pem", "must be a PEM certificate");
    if (req.publicAddresses.some((a) => isIP(a) === 0)) v.add("public_addresses", "must be IPv4 or IPv6 addresses");
    if (req.poolerPortOffset < 0 || req.poolerPortOffset + req.portRangeEnd > 65535) {
      v.add("pooler_port_offset", "must keep the poolers' ports within 1024-65535");
    }
    if (req.controlUrl !== "" && !/^https?:\/\/[^\s/]+\/?$/.test(req.controlUrl))
      v.add("control_url", "must be an http(s) URL of a host and port");
    v.throwIfAny();
    const moved = await upsertAgent(ctx.pool, req, ctx.clock.now());
    await setAgentPooling(ctx.pool, req.agentId, {
      pooler_port_offset: req.poolerPortOffset,
      pooler_unavailable_reason: req.poolerPortOffset > 0 ? "" : req.poolerUnavailableReason || "the agent runs no poolers",
    });
    ctx.log.info("agent registered", {
      agent_id: req.agentId,
      regions: req.regions,
      capacity: req.capacity,
      public_addresses: req.publicAddresses,
    });
    // Its databases' records follow the agent to its new address (in the background: registration does not wait on DNS).
    if (moved && ctx.dns)
      void republishAgent(ctx, req.agentId).catch((err: unknown) => ctx.log.warn("DNS records not moved", { error: err }));
    return {};
  };
}

/**
 * What an agent observed of its instances; it is heard from, which keeps it
 * live for placement and its operations. A database that now runs may be due
 * its first backup: the schedule looks at once rather than at its next pass.
 */
export function reportInstances(ctx: AppContext) {
  return async (req: ReportInstancesRequest) => {
    if (!(await touchAgent(ctx.pool, req.agentId, ctx.clock.now()))) throw notFound("agent (register first)");
    let nowRunning = false;
    for (const obs of req.instances) {
      // An old primary's instance removed after a failover: not a database of this agent any more.
      if (
        obs.state === ObservedState.PURGED &&
        (await withTransaction(ctx.pool, (db) => confirmDiscard(db, req.agentId, obs.databaseId)))
      ) {
        ctx.log.info("old primary's instance discarded", { agent_id: req.agentId, instance_id: obs.databaseId });
        continue;
      }
      let outcome = await applyObservation(ctx, req.agentId, obs);
      if (outcome === "awaiting-record") {
        // Running, but its name must resolve first: published (confirmed by the server), then the report again.
        const published = await publishBeforeRunning(ctx, obs.databaseId);
        if (published) outcome = await applyObservation(ctx, req.agentId, obs, published);
      }
      if (outcome === "running") nowRunning = true;
    }
    if (nowRunning) {
      // The report is recorded; a failure here is the schedule's next pass's to retry.
      await scheduleBackups(ctx).catch((err: unknown) => ctx.log.warn("backup schedule failed; will retry", { error: err }));
    }
    return {};
  };
}

/** An agent's backup news: outcomes, pruned backups, each database's restore window and archiving health. */
export function reportBackups(ctx: AppContext) {
  return async (req: ReportBackupsRequest) => {
    if (!(await touchAgent(ctx.pool, req.agentId, ctx.clock.now()))) throw notFound("agent (register first)");
    for (const report of req.databases) {
      await applyBackupReport(ctx, req.agentId, report);
    }
    return {};
  };
}

/**
 * An agent renewing its leases on its highly available primaries (every few
 * seconds): each it may keep taking writes on is granted for HA_LEASE_SECONDS
 * from now; the agent counts them from when it sent the request, so its
 * lease always ends before ours. It is heard from, like a report.
 */
export function renewLeases(ctx: AppContext) {
  return async (req: RenewLeasesRequest): Promise<RenewLeasesResponse> => {
    const now = ctx.clock.now();
    if (!(await touchAgent(ctx.pool, req.agentId, now))) throw notFound("agent (register first)");
    const leaseMs = ctx.cfg.haLeaseSeconds * 1000;
    const databaseIds = await renew(ctx.pool, req.agentId, now, new Date(now.getTime() + leaseMs));
    return create(RenewLeasesResponseSchema, { databaseIds, leaseMillis: leaseMs });
  };
}
