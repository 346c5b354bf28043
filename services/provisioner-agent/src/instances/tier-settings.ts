import os from "node:os";
import { isTierName, TIER_NAMES, tierSpec, type TierName } from "@dbaas/catalogue";
import type { CgroupLimits } from "./cgroups.ts";

/** The tiers are the catalogue's (services/catalogue/src/catalogue.ts): their names, vCPUs and memory are read from there. */
export { TIER_NAMES, type TierName };

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const KiB = 1024;

/** What a tier promises the customer, before density scaling: the catalogue's vCPUs and memory. */
function promised(tier: TierName): { vcpus: number; memoryBytes: number } {
  const spec = tierSpec(tier);
  return { vcpus: spec.vcpu, memoryBytes: spec.memoryGb * GiB };
}

/** WAL sizing is disk, not memory, so it is not scaled either. */
const MAX_WAL_MB: Readonly<Record<TierName, number>> = { micro: 512, small: 1024, medium: 2048, large: 4096, xlarge: 8192 };
const MIN_WAL_MB: Readonly<Record<TierName, number>> = { micro: 32, small: 64, medium: 128, large: 256, xlarge: 512 };

/** How many micro instances one host should hold; drives the default memory scale. */
export const TARGET_MICRO_DENSITY = 200;
const MIN_SCALE = 1 / 16;

/**
 * Factor applied to every memory figure. Real clouds give a micro instance a
 * dedicated 1 GB; a shared host cannot, so memory is scaled to make
 * {@link TARGET_MICRO_DENSITY} micro instances fit into `hostMemoryBytes`
 * (24 GB host: ≈0.11, micro shared_buffers ≈ 29MB). Clamped to [1/16, 1]:
 * never more generous than the tier itself, never so small that PostgreSQL
 * becomes unusable.
 */
export function defaultMemoryScale(hostMemoryBytes: number = os.totalmem()): number {
  const s = hostMemoryBytes / (TARGET_MICRO_DENSITY * promised("micro").memoryBytes);
  return Math.min(1, Math.max(MIN_SCALE, s));
}

/** PostgreSQL memory literal; whole MB where that loses nothing meaningful. */
function mem(bytes: number, minKb = 64): string {
  if (bytes >= 16 * MiB) return `${Math.round(bytes / MiB)}MB`;
  return `${Math.max(minKb, Math.round(bytes / KiB))}kB`;
}

export interface TierSettingsOptions {
  /** Override the memory scale factor (see {@link defaultMemoryScale}). */
  scale?: number;
}

/**
 * postgresql.conf settings for `tier`, shaped like a real cloud's (shared_buffers
 * 25% of memory, effective_cache_size 75%, parallelism from vCPUs) but with
 * memory multiplied by a density scale. Every tier gets strictly more
 * shared_buffers and max_connections than the one below it, so a resize is
 * observable with `SHOW`.
 */
export function tierSettings(
  tier: string,
  hostMemoryBytes: number = os.totalmem(),
  opts: TierSettingsOptions = {},
): Record<string, string> {
  if (!isTierName(tier)) throw new Error(`unknown tier ${JSON.stringify(tier)}; expected one of ${TIER_NAMES.join(", ")}`);
  const scale = opts.scale ?? defaultMemoryScale(hostMemoryBytes);
  if (!(scale > 0)) throw new Error(`tierSettings: scale must be positive, got ${scale}`);
  const { vcpus, memoryBytes } = promised(tier);
  const m = memoryBytes * scale;
  const halfCpus = Math.floor(vcpus / 2);
  return {
    shared_buffers: mem(m / 4, 128),
    effective_cache_size: mem((m * 3) / 4),
    maintenance_work_mem: mem(Math.min(m / 16, 2 * GiB), 1024),
    work_mem: mem(m / 256),
    // Not scaled: part of what a tier promises (the catalogue's), costing little shared memory.
    max_connections: String(tierSpec(tier).maxConnections),
    max_worker_processes: String(Math.max(8, vcpus * 2)),
    max_parallel_workers: String(vcpus),
    max_parallel_workers_per_gather: String(halfCpus),
    max_parallel_maintenance_workers: String(halfCpus),
    max_wal_size: `${MAX_WAL_MB[tier]}MB`,
    min_wal_size: `${MIN_WAL_MB[tier]}MB`,
    random_page_cost: "1.1",
    effective_io_concurrency: "200",
    // A runaway sort or hash cannot fill the disk with temporary files: 20 % of the tier's storage.
    temp_file_limit: `${Math.round((tierSpec(tier).storageGb * GiB * TEMP_FILE_SHARE) / KiB)}kB`,
  };
}

/** Share of a tier's storage one session's temporary files may take (temp_file_limit). */
const TEMP_FILE_SHARE = 0.2;
const CPU_PERIOD_US = 100_000;
/** Processes beside the connections: background workers, autovacuum, walsenders, the archiver and a margin. */
const PIDS_BESIDE_CONNECTIONS = 64;

/**
 * The kernel's limits for a server of `tier` (cgroups.ts): the catalogue's
 * vCPUs as CPU quota and as CPU weight under contention, its memory unscaled (the settings above are scaled
 * to the host; the limit is what the customer pays for), and room for the
 * tier's connections and workers in the pids limit.
 */
export function tierResourceLimits(tier: string): CgroupLimits {
  if (!isTierName(tier)) throw new Error(`unknown tier ${JSON.stringify(tier)}; expected one of ${TIER_NAMES.join(", ")}`);
  const { vcpus, memoryBytes } = promised(tier);
  return {
    cpuQuotaUs: vcpus * CPU_PERIOD_US,
    cpuPeriodUs: CPU_PERIOD_US,
    cpuWeight: vcpus * 100,
    memoryBytes,
    pids: tierSpec(tier).maxConnections + Math.max(8, vcpus * 2) + PIDS_BESIDE_CONNECTIONS,
  };
}
