import { setTimeout as sleep } from "node:timers/promises";
import { withTransaction } from "@dbaas/kit";
import { scheduleBackups } from "./backup-schedule.ts";
import type { AppContext } from "./context.ts";
import { lockStranded, markExpiredForPurge, setStatus } from "./db/databases.ts";
import { deleteExpiredTrustedSources } from "./db/edge.ts";
import { notifyAgent } from "./db/notify.ts";
import { finishOperations } from "./db/operations.ts";
import { reconcileRecords } from "./dns/records.ts";
import { createSupervisorState, superviseHighAvailability } from "./high-availability.ts";
import { maintainSamples } from "./metrics/retention.ts";
import { purgeDeliveredOutbox, relayOutboxOnce, relayUsageOnce } from "./outbox-relay.ts";
import { relayStorageNoticesOnce } from "./storage.ts";
import { TRANSITIONAL_STATUSES } from "./statuses.ts";

/** Marks deleted databases past their retention window (by the context's clock) for purging by their agent. */
export async function sweepExpiredDeletions(ctx: AppContext): Promise<number> {
  return await withTransaction(ctx.pool, async (db) => {
    const agents = await markExpiredForPurge(db, ctx.clock.now());
    for (const agentId of new Set(agents)) await notifyAgent(db, agentId);
    return agents.length;
  });
}

/**
 * Removes trusted sources past their expires_at and re-sends the specs of the agents concerned.
 * The agents stopped admitting them on time by themselves (they know each entry's expires_at).
 */
export async function sweepExpiredTrustedSources(ctx: AppContext): Promise<number> {
  return await withTransaction(ctx.pool, async (db) => {
    const agents = await deleteExpiredTrustedSources(db, ctx.clock.now());
    for (const agentId of new Set(agents)) await notifyAgent(db, agentId);
    return agents.length;
  });
}

/**
 * A database in a transitional status whose agent has gone silent cannot get
 * there: it is marked `failed`, naming the host, instead of waiting forever.
 * Silent is AGENT_TIMEOUT_SECONDS without a report, by the context's clock.
 * Nothing else changes — when the agent reports again and the instance is in
 * the desired state, the report moves it out of `failed` like any other.
 */
export async function failStrandedOperations(ctx: AppContext): Promise<number> {
  return await withTransaction(ctx.pool, async (db) => {
    const rows = await lockStranded(db, TRANSITIONAL_STATUSES, ctx.cfg.agentTimeoutSeconds, ctx.clock.now());
    for (const row of rows) {
      const reason = `host ${row.agent_id} has not reported since ${row.last_seen_at.toISOString()}; the ${row.status} operation could not complete`;
      await setStatus(db, row, "failed", reason);
      await finishOperations(db, row.id, row.generation, reason);
    }
    return rows.length;
  });
}

/**
 * The databases service's background work until `signal` aborts, in
 * independent loops so a billing outage never holds up the sweeps: the outbox
 * relay (every `intervalMs`, at once while there is a backlog, backing off
 * while billing fails), the sweeps (stranded operations every few seconds,
 * retention at `purgeSweepIntervalMs`), the backup schedule (a pass at
 * once, then every `backupScheduleIntervalMs`) and the samples' roll-up and
 * purge with the delivered outbox rows' purge (every
 * `samplesMaintenanceIntervalMs`). Usage samples relay beside status events.
 * With DNS records kept, the records' reconcile (every DNS_RECONCILE_INTERVAL_MS). The high
 * availability supervisor (failovers, switchovers, standbys) every HA_SUPERVISE_INTERVAL_MS.
 */
export function startBackgroundWork(ctx: AppContext, signal: AbortSignal, intervalMs = 500): Promise<void> {
  const pause = (ms: number) => sleep(ms, undefined, { signal }).catch(() => {});

  const relay = async (what: string, once: (ctx: AppContext) => Promise<number>) => {
    let failures = 0;
    while (!signal.aborted) {
      let delivered = 0;
      try {
        delivered = await once(ctx);
        if (failures > 0) ctx.log.info("billing reachable again; outbox draining", { what });
        failures = 0;
      } catch (err) {
        if (failures++ === 0) ctx.log.warn("outbox delivery failed; will retry", { what, error: err });
      }
      if (delivered === 0) await pause(Math.min(intervalMs * 2 ** Math.min(failures, 5), 10_000));
    }
  };

  const sweeps = async () => {
    let lastPurgeSweep = 0;
    while (!signal.aborted) {
      try {
        const stranded = await failStrandedOperations(ctx);
        if (stranded > 0) ctx.log.warn("operations on silent hosts marked failed", { count: stranded });
        const tidied = await sweepExpiredTrustedSources(ctx);
        if (tidied > 0) ctx.log.info("expired trusted sources removed", { agents: tidied });
        const now = ctx.clock.now().getTime();
        if (now - lastPurgeSweep > ctx.cfg.purgeSweepIntervalMs) {
          lastPurgeSweep = now;
          const purged = await sweepExpiredDeletions(ctx);
          if (purged > 0) ctx.log.info("deleted databases past retention marked for purge", { count: purged });
        }
      } catch (err) {
        ctx.log.warn("sweep failed; will retry", { error: err });
      }
      await pause(Math.min(5_000, ctx.cfg.purgeSweepIntervalMs));
    }
  };

  const backups = async () => {
    while (!signal.aborted) {
      try {
        const started = await scheduleBackups(ctx);
        if (started > 0) ctx.log.info("scheduled backups started", { count: started });
      } catch (err) {
        ctx.log.warn("backup schedule failed; will retry", { error: err });
      }
      await pause(ctx.cfg.backupScheduleIntervalMs);
    }
  };

  const samples = async () => {
    while (!signal.aborted) {
      try {
        await maintainSamples(ctx);
      } catch (err) {
        ctx.log.warn("samples roll-up or purge failed; will retry", { error: err });
      }
      try {
        const purged = await purgeDeliveredOutbox(ctx);
        if (purged > 0) ctx.log.info("delivered outbox rows past retention deleted", { count: purged });
      } catch (err) {
        ctx.log.warn("outbox purge failed; will retry", { error: err });
      }
      await pause(ctx.cfg.samplesMaintenanceIntervalMs);
    }
  };

  const dnsRecords = async () => {
    const dns = ctx.cfg.dns;
    if (dns.provider === "none" || !ctx.dns) return;
    let failing = false;
    while (!signal.aborted) {
      try {
        const repaired = await reconcileRecords(ctx);
        if (repaired > 0) ctx.log.info("DNS records repaired", { count: repaired });
        if (failing) ctx.log.info("DNS server reachable again; records reconciled");
        failing = false;
      } catch (err) {
        if (!failing) ctx.log.warn("DNS reconcile failed; will retry", { error: err });
        failing = true;
      }
      await pause(dns.reconcileIntervalMs);
    }
  };

  const highAvailability = async () => {
    const state = createSupervisorState();
    let failing = false;
    while (!signal.aborted) {
      try {
        const failovers = await superviseHighAvailability(ctx, state);
        if (failovers > 0) ctx.log.warn("failovers made", { count: failovers });
        failing = false;
      } catch (err) {
        if (!failing) ctx.log.warn("high availability supervisor failed; will retry", { error: err });
        failing = true;
      }
      await pause(ctx.cfg.haSuperviseIntervalMs);
    }
  };

  // Status events and usage samples relay apart: a billing that rejects one kind never holds up the other.
  return Promise.all([
    relay("status events", relayOutboxOnce),
    relay("usage samples", relayUsageOnce),
    relay("storage mails", relayStorageNoticesOnce),
    sweeps(),
    backups(),
    samples(),
    dnsRecords(),
    highAvailability(),
  ]).then(() => {});
}
