import type pg from "pg";
import { TIERS, tierByName } from "@dbaas/kit";
import { listStatusChangesForPeriod, type StatusChange } from "./db/status-events.ts";

/** The status in which a database accrues compute charges; every other status stops the meter. */
export const RUNNING = "running";

const MS_PER_HOUR = 3_600_000;

/** A stretch of time a database spent running at one tier. */
export interface RunningInterval {
  databaseId: string;
  tier: string;
  milliseconds: number;
}

/**
 * The running time of each database within [from, to]. `changes` must be
 * ordered by database, then time. A `running` change opens an interval at its
 * tier; the next change of that database closes it (and opens a new one if it
 * is `running` again, e.g. at another tier). An interval still open is closed
 * at `to`; one opened before `from` counts from `from`.
 */
export function runningIntervals(changes: readonly StatusChange[], from: Date, to: Date): RunningInterval[] {
  const intervals: RunningInterval[] = [];
  const fromMs = from.getTime();
  const toMs = to.getTime();
  let open: { databaseId: string; tier: string; since: number } | undefined;
  const close = (at: number) => {
    if (!open) return;
    const ms = Math.min(at, toMs) - Math.max(open.since, fromMs);
    if (ms > 0) intervals.push({ databaseId: open.databaseId, tier: open.tier, milliseconds: ms });
    open = undefined;
  };
  for (const change of changes) {
    const at = change.occurredAt.getTime();
    if (open && open.databaseId !== change.databaseId) close(toMs);
    close(at);
    if (change.status === RUNNING) open = { databaseId: change.databaseId, tier: change.tier, since: at };
  }
  close(toMs);
  return intervals;
}

/** A metered quantity (4 decimals) and its price (rounded as the caller asked). */
export interface PricedLine {
  quantity: number;
  amount: number;
}

/**
 * Compute hours and their price at each interval's tier. Summed in integers
 * (milliseconds, micro-dollars) and rounded once, half up: hours to 4
 * decimals, the amount to `decimals` — 4 for the usage report, a running
 * meter; 2 for an invoice line, so cents are not rounded from an already
 * rounded amount.
 */
export function priceCompute(intervals: readonly RunningInterval[], decimals = 4): PricedLine {
  let totalMs = 0;
  // micro-USD per hour × milliseconds: exceeds 2^53 for large organizations.
  let microUsdMs = 0n;
  for (const interval of intervals) {
    const tier = tierByName(interval.tier);
    // Tiers are checked on ingest; one missing now means the catalogue dropped a tier still in use.
    if (!tier) throw new Error(`tier "${interval.tier}" is not in the catalogue; cannot price its usage`);
    totalMs += interval.milliseconds;
    microUsdMs += BigInt(interval.milliseconds) * BigInt(Math.round(tier.hourlyPrice * 1_000_000));
  }
  // 1e-4 hour = 360 ms; 10^-d USD = 10^(6-d) micro-USD, so 10^-d USD·h = 10^(6-d) × 3.6e6 micro-USD·ms.
  const hourUnits = Math.round(totalMs / 360);
  const perAmountUnit = 10n ** BigInt(6 - decimals) * BigInt(MS_PER_HOUR);
  const amountUnits = (microUsdMs + perAmountUnit / 2n) / perAmountUnit;
  return { quantity: hourUnits / 10_000, amount: Number(amountUnits) / 10 ** decimals };
}

/** Compute priced per tier, in catalogue order, for the tiers that ran at all. */
export function priceComputeByTier(intervals: readonly RunningInterval[], decimals: number): (PricedLine & { tier: string })[] {
  return TIERS.map((t) => t.name)
    .map((tier) => ({ tier, intervals: intervals.filter((i) => i.tier === tier) }))
    .filter((t) => t.intervals.length > 0)
    .map((t) => ({ tier: t.tier, ...priceCompute(t.intervals, decimals) }));
}

// Nothing feeds these meters yet: storage GB-months and transfer GB will come
// from the provisioner agents' storage and data-transfer samples, replica hours
// from replica status changes once databases have replicas. Until then they are
// reported as zero rather than left out, so the report's shape is stable.
const NOT_METERED_YET: PricedLine = { quantity: 0, amount: 0 };

/** What an organization used within a period. */
export interface Usage {
  running: RunningInterval[];
  storage: PricedLine;
  dataTransfer: PricedLine;
  replicas: PricedLine;
}

/** The usage within [from, to] out of changes listed for a period that contains it (see runningIntervals). */
export function usageOf(changes: readonly StatusChange[], from: Date, to: Date): Usage {
  return {
    running: runningIntervals(changes, from, to),
    storage: NOT_METERED_YET,
    dataTransfer: NOT_METERED_YET,
    replicas: NOT_METERED_YET,
  };
}

/** An organization's usage within [from, to]: month to date, or a month that has ended. */
export async function readUsage(db: pg.Pool | pg.PoolClient, organizationId: string, from: Date, to: Date): Promise<Usage> {
  return usageOf(await listStatusChangesForPeriod(db, organizationId, from, to), from, to);
}

/** The calendar month (UTC) containing `now`, as [start, end) — `end` is the first instant of the next month. */
export function monthOf(now: Date): { start: Date; end: Date } {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  return { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
}

/** A month's name, `YYYY-MM`, from its first instant. */
export const periodName = (start: Date) => start.toISOString().slice(0, 7);

/** Month-to-date usage priced as a running meter (4 decimals), and its total. */
export interface MonthToDate {
  period: { start: Date; end: Date };
  compute: PricedLine;
  storage: PricedLine;
  dataTransfer: PricedLine;
  replicas: PricedLine;
  total: number;
}

/**
 * An organization's usage in the calendar month (UTC) of `now`, up to `now`:
 * the figure GetUsage reports and spending alerts are checked against.
 */
export async function readMonthToDate(db: pg.Pool | pg.PoolClient, organizationId: string, now: Date): Promise<MonthToDate> {
  const period = monthOf(now);
  const usage = await readUsage(db, organizationId, period.start, now);
  const compute = priceCompute(usage.running);
  const { storage, dataTransfer, replicas } = usage;
  // Every amount is a whole number of 1e-4 USD; summing those units avoids float drift.
  const totalUnits = [compute, storage, dataTransfer, replicas].reduce((sum, l) => sum + Math.round(l.amount * 10_000), 0);
  return { period, compute, storage, dataTransfer, replicas, total: totalUnits / 10_000 };
}
