import { monthKey, monthOf, type MonthKey } from "../months.ts";

/** A storage sample in a database's chain, ordered by (sampledAt, sampleId). */
export interface StoragePoint {
  sampleId: string;
  sampledAt: Date;
  storageBytes: bigint;
}

function add<K>(into: Map<K, bigint>, key: K, value: bigint): void {
  into.set(key, (into.get(key) ?? 0n) + value);
}

/**
 * The byte-milliseconds a database's consecutive samples accrue, per month:
 * the size a sample measured is held until the next sample, for at most
 * `maxGapMs` — past that the database is taken as not measured (an agent
 * outage, a deleted database's last sample), not as holding its size. An
 * interval across the end of a month is split at it.
 */
export function storageAccrual(chain: readonly StoragePoint[], maxGapMs: number): Map<MonthKey, bigint> {
  const months = new Map<MonthKey, bigint>();
  for (let i = 1; i < chain.length; i++) {
    const held = chain[i - 1]!;
    let from = held.sampledAt.getTime();
    const to = from + Math.min(chain[i]!.sampledAt.getTime() - from, maxGapMs);
    while (from < to) {
      const month = monthOf(new Date(from));
      const until = Math.min(to, month.end.getTime());
      add(months, monthKey(month.start), held.storageBytes * BigInt(until - from));
      from = until;
    }
  }
  return months;
}

/**
 * What new samples change in a database's storage accrual, per month: the
 * accrual of the window with them minus the window without them. `window` is
 * every stored sample from the last one before the earliest new sample to the
 * first one after the latest, in chain order; pairs outside it do not change.
 * Negative in a month where a new sample measured less than the one before it
 * had been held for.
 */
export function storageDelta(
  window: readonly StoragePoint[],
  isNew: (p: StoragePoint) => boolean,
  maxGapMs: number,
): Map<MonthKey, bigint> {
  const delta = storageAccrual(window, maxGapMs);
  for (const [month, value] of storageAccrual(
    window.filter((p) => !isNew(p)),
    maxGapMs,
  ))
    add(delta, month, -value);
  return delta;
}

/** Cumulative byte counters of one epoch. */
export interface Counters {
  bytesIn: bigint;
  bytesOut: bigint;
}

export interface CounterSample extends Counters {
  countersEpoch: string;
  sampledAt: Date;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);

/**
 * The transfer new samples add, per month of the sample that measured it.
 * `highest` holds the highest counters seen per epoch (absent: an epoch not
 * seen yet, whose counters started at zero) and is raised in place. A sample
 * adds only what raises its epoch's highest: a resent or late one (lower than
 * a sample already counted) adds nothing, so no order of arrival counts a
 * byte twice; a new epoch's first sample adds all it counted.
 */
export function transferDeltas(samples: readonly CounterSample[], highest: Map<string, Counters>): Map<MonthKey, Counters> {
  const months = new Map<MonthKey, Counters>();
  for (const s of samples) {
    const seen = highest.get(s.countersEpoch) ?? { bytesIn: 0n, bytesOut: 0n };
    const bytesIn = max(0n, s.bytesIn - seen.bytesIn);
    const bytesOut = max(0n, s.bytesOut - seen.bytesOut);
    highest.set(s.countersEpoch, { bytesIn: max(seen.bytesIn, s.bytesIn), bytesOut: max(seen.bytesOut, s.bytesOut) });
    if (bytesIn === 0n && bytesOut === 0n) continue;
    const key = monthKey(s.sampledAt);
    const month = months.get(key) ?? { bytesIn: 0n, bytesOut: 0n };
    months.set(key, { bytesIn: month.bytesIn + bytesIn, bytesOut: month.bytesOut + bytesOut });
  }
  return months;
}
