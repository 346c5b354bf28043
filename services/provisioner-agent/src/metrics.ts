import { Counter, Gauge, type Registry } from "@dbaas/kit";
import { ObservedState } from "@dbaas/proto/agent";
import { REJECT_REASONS } from "./backups/archiver.ts";
import type { BackupManager } from "./backups/backup-manager.ts";
import type { Reconciler } from "./reconciler.ts";

/** Every state an instance can be observed in, as the `status` label says it. */
const STATES = Object.entries(ObservedState)
  .filter((e): e is [string, ObservedState] => typeof e[1] === "number" && e[1] !== ObservedState.UNSPECIFIED)
  .map(([name, state]) => ({ state, status: name.toLowerCase() }));

/**
 * The agent's own metrics, read from the control loop when scraped:
 * `instances{status}` from the reconciler's latest observations (every status
 * present, 0 included, so a series never vanishes), `reconcile_errors_total`,
 * `wal_spool_bytes`, the archived WAL waiting in the spools for the store, and
 * `base_backups_total{result}`, base backup attempts ended (completed / failed),
 * and `wal_files_refused_total{reason}`, WAL spool entries the uploader would
 * not read (symlink / not_regular / foreign_owner: what a tenant's server may
 * have planted to make the agent upload a file it cannot read itself).
 */
export function agentMetrics(registry: Registry, loop: { reconciler: Reconciler; backups: BackupManager }): void {
  new Gauge({
    name: "instances",
    help: "Instances in the desired state by their last observed status",
    labelNames: ["status"] as const,
    registers: [registry],
    collect() {
      const counts = new Map<ObservedState, number>();
      for (const o of loop.reconciler.observations()) counts.set(o.state, (counts.get(o.state) ?? 0) + 1);
      for (const { state, status } of STATES) this.set({ status }, counts.get(state) ?? 0);
    },
  });
  new Counter({
    name: "reconcile_errors_total",
    help: "Failed attempts to converge an instance on its desired state",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(loop.reconciler.failedSteps());
    },
  });
  new Gauge({
    name: "wal_spool_bytes",
    help: "Archived WAL in the agent's spools, not yet uploaded to the backup store",
    registers: [registry],
    collect() {
      let bytes = 0;
      for (const d of loop.backups.snapshot()) bytes += Number(d.spoolBytes);
      this.set(bytes);
    },
  });
  new Counter({
    name: "base_backups_total",
    help: "Base backup attempts this agent ended, by result (a failed attempt is retried up to three times)",
    labelNames: ["result"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const o = loop.backups.outcomes();
      this.inc({ result: "completed" }, o.completed);
      this.inc({ result: "failed" }, o.failed);
    },
  });
  new Counter({
    name: "wal_files_refused_total",
    help: "WAL spool entries not uploaded because they are not regular files of the database's server (symlinks, other owners)",
    labelNames: ["reason"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const refused = loop.backups.walFilesRefused();
      for (const reason of REJECT_REASONS) this.inc({ reason }, refused[reason]);
    },
  });
}
