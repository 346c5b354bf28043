import { Validator, notFound } from "@dbaas/kit";
import type { RegisterAgentRequest, ReportBackupsRequest, ReportInstancesRequest } from "@dbaas/proto/agent";
import { scheduleBackups } from "../backup-schedule.ts";
import { applyBackupReport } from "../backups.ts";
import type { AppContext } from "../context.ts";
import { touchAgent, upsertAgent } from "../db/agents.ts";
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
    v.throwIfAny();
    await upsertAgent(ctx.pool, req, ctx.clock.now());
    ctx.log.info("agent registered", { agent_id: req.agentId, regions: req.regions, capacity: req.capacity });
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
      if (await applyObservation(ctx, req.agentId, obs)) nowRunning = true;
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
