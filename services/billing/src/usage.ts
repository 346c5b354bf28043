import { tierByName } from "@dbaas/kit";
import type { StatusChange } from "./db/status-events.ts";

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

/** A metered quantity and its price, both rounded to 4 decimals. */
export interface PricedLine {
  quantity: number;
  amount: number;
}

/**
 * Compute hours and their price at each interval's tier. Summed in integers
 * (milliseconds, micro-dollars) and rounded once, half up, to 4 decimals: the
 * usage report is a running meter, invoices round to cents later.
 */
export function priceCompute(intervals: readonly RunningInterval[]): PricedLine {
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
  // 1e-4 hour = 360 ms; 1e-4 USD = 100 micro-USD, so 1e-4 USD·h = 100 × 3.6e6 micro-USD·ms.
  const hourUnits = Math.round(totalMs / 360);
  const perAmountUnit = 100n * BigInt(MS_PER_HOUR);
  const amountUnits = (microUsdMs + perAmountUnit / 2n) / perAmountUnit;
  return { quantity: hourUnits / 10_000, amount: Number(amountUnits) / 10_000 };
}

/** The calendar month (UTC) containing `now`, as [start, end) — `end` is the first instant of the next month. */
export function monthOf(now: Date): { start: Date; end: Date } {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  return { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
}
