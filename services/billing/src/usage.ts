import type pg from "pg";
import { STORAGE_PRICE_GB_MONTH, TIERS, TRANSFER_FREE_GB_PER_MONTH, TRANSFER_PRICE_GB, tierByName } from "@dbaas/catalogue";
import { listStatusChangesForPeriod, type InstanceKind, type StatusChange } from "./db/status-events.ts";
import { readMeteredMonths, storedBytesNow, type MeteredMonth } from "./db/usage-samples.ts";
import { hoursInMonth, monthKey, monthOf } from "./months.ts";

/** The status in which a database accrues compute charges (a replica, replica hours); every other status stops the meter. */
export const RUNNING = "running";

const MS_PER_HOUR = 3_600_000;

/** A stretch of time a database or replica spent running at one tier. */
export interface RunningInterval {
  databaseId: string;
  kind: InstanceKind;
  tier: string;
  milliseconds: number;
}

/**
 * The running time of each database and replica within [from, to]. `changes`
 * must be ordered by database, then time. A `running` change opens an
 * interval at its tier and kind; the next change of that database closes it
 * (and opens a new one if it is `running` again, e.g. at another tier). An
 * interval still open is closed at `to`; one opened before `from` counts from `from`.
 */
export function runningIntervals(changes: readonly StatusChange[], from: Date, to: Date): RunningInterval[] {
  const intervals: RunningInterval[] = [];
  const fromMs = from.getTime();
  const toMs = to.getTime();
  let open: { databaseId: string; kind: InstanceKind; tier: string; since: number } | undefined;
  const close = (at: number) => {
    if (!open) return;
    const ms = Math.min(at, toMs) - Math.max(open.since, fromMs);
    if (ms > 0) intervals.push({ databaseId: open.databaseId, kind: open.kind, tier: open.tier, milliseconds: ms });
    open = undefined;
  };
  for (const change of changes) {
    const at = change.occurredAt.getTime();
    if (open && open.databaseId !== change.databaseId) close(toMs);
    close(at);
    if (change.status === RUNNING) open = { databaseId: change.databaseId, kind: change.kind, tier: change.tier, since: at };
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
 * Running hours (compute, or replica hours) and their price at each interval's tier. Summed in integers
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

/** Half-up division of non-negative integers. */
const divideRounded = (n: bigint, d: bigint) => (n + d / 2n) / d;

const BYTES_PER_GB = 1_000_000_000n;
const microUsd = (price: number) => BigInt(Math.round(price * 1_000_000));

/**
 * Storage of a month: byte-milliseconds accrued from the samples as
 * GB-months (GB-hours / hours in the month, 4 decimals) at the catalogue's
 * price, the amount rounded once to `decimals`.
 */
export function priceStorage(byteMs: bigint, monthStart: Date, decimals = 4): PricedLine {
  const byteMsPerGbMonth = BYTES_PER_GB * BigInt(MS_PER_HOUR) * BigInt(hoursInMonth(monthStart));
  const quantity = divideRounded(byteMs * 10_000n, byteMsPerGbMonth);
  const amount = divideRounded(byteMs * microUsd(STORAGE_PRICE_GB_MONTH) * 10n ** BigInt(decimals), byteMsPerGbMonth * 1_000_000n);
  return { quantity: Number(quantity) / 10_000, amount: Number(amount) / 10 ** decimals };
}

/** A month's egress: all of it in GB, what is beyond the free allowance, and the price of that. */
export interface PricedTransfer {
  gb: number;
  billableGb: number;
  amount: number;
}

/** Egress bytes of a month in GB (4 decimals); the first TRANSFER_FREE_GB_PER_MONTH GB are free, the rest priced. */
export function priceTransfer(egressBytes: bigint, decimals = 4): PricedTransfer {
  const free = BigInt(TRANSFER_FREE_GB_PER_MONTH) * BYTES_PER_GB;
  const billable = egressBytes > free ? egressBytes - free : 0n;
  const gb = (bytes: bigint) => Number(divideRounded(bytes * 10_000n, BYTES_PER_GB)) / 10_000;
  const amount = divideRounded(billable * microUsd(TRANSFER_PRICE_GB) * 10n ** BigInt(decimals), BYTES_PER_GB * 1_000_000n);
  return { gb: gb(egressBytes), billableGb: gb(billable), amount: Number(amount) / 10 ** decimals };
}

/** Nothing metered from samples. */
export const NO_SAMPLES: MeteredMonth = { storageByteMs: 0n, egressBytes: 0n };

/** What an organization used within a period of one month. */
export interface Usage {
  /** Databases' running time: compute. */
  running: RunningInterval[];
  /** Storage and egress the samples accrued in the month. */
  metered: MeteredMonth;
  /** Read replicas' running time: billed as replica hours at their tiers' hourly prices, not as compute. */
  replicas: RunningInterval[];
}

/** The usage within [from, to] out of changes listed for a period that contains it (see runningIntervals). */
export function usageOf(changes: readonly StatusChange[], from: Date, to: Date, metered: MeteredMonth): Usage {
  const intervals = runningIntervals(changes, from, to);
  return {
    running: intervals.filter((i) => i.kind === "database"),
    metered,
    replicas: intervals.filter((i) => i.kind === "replica"),
  };
}

/** Month-to-date usage priced as a running meter (4 decimals), and its total. */
export interface MonthToDate {
  period: { start: Date; end: Date };
  compute: PricedLine;
  /** GB stored now, and what storage has cost so far this month. */
  storage: PricedLine;
  /** GB sent to clients this month, and what it costs beyond the free allowance. */
  dataTransfer: PricedLine;
  /** Hours read replicas ran this month, at their tiers' hourly prices. */
  replicas: PricedLine;
  total: number;
}

/**
 * An organization's usage in the calendar month (UTC) of `now`, up to `now`:
 * the figure GetUsage reports and spending alerts are checked against.
 */
export async function readMonthToDate(db: pg.Pool | pg.PoolClient, organizationId: string, now: Date): Promise<MonthToDate> {
  const period = monthOf(now);
  const changes = await listStatusChangesForPeriod(db, organizationId, period.start, now);
  const metered = (await readMeteredMonths(db, organizationId, period.start, period.end)).get(monthKey(period.start)) ?? NO_SAMPLES;
  const usage = usageOf(changes, period.start, now, metered);
  const compute = priceCompute(usage.running);
  const storedGb = Number(divideRounded((await storedBytesNow(db, organizationId)) * 10_000n, BYTES_PER_GB)) / 10_000;
  const storage = { quantity: storedGb, amount: priceStorage(metered.storageByteMs, period.start).amount };
  const transfer = priceTransfer(metered.egressBytes);
  const dataTransfer = { quantity: transfer.gb, amount: transfer.amount };
  const replicas = priceCompute(usage.replicas);
  // Every amount is a whole number of 1e-4 USD; summing those units avoids float drift.
  const totalUnits = [compute, storage, dataTransfer, replicas].reduce((sum, l) => sum + Math.round(l.amount * 10_000), 0);
  return { period, compute, storage, dataTransfer, replicas, total: totalUnits / 10_000 };
}
