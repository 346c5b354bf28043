import type pg from "pg";
import { withTransaction } from "@dbaas/kit";
import { scheduleMonths } from "../db/invoices.ts";
import {
  addToMonths,
  advanceLatest,
  insertSamples,
  lockMeteredDatabases,
  readEpochs,
  sampleKey,
  storageWindow,
  writeEpochs,
  type MonthAccrual,
  type UsageSampleRecord,
} from "../db/usage-samples.ts";
import type { MonthKey } from "../months.ts";
import { storageDelta, transferDeltas } from "./accrual.ts";

/** Chain order: by sampled_at, ties by sample id. */
function byChain(a: UsageSampleRecord, b: UsageSampleRecord): number {
  const t = a.sampledAt.getTime() - b.sampledAt.getTime();
  return t !== 0 ? t : a.sampleId < b.sampleId ? -1 : a.sampleId > b.sampleId ? 1 : 0;
}

/** The batch by database, each in chain order; a sample id repeated within the batch keeps its first copy. */
function groupByDatabase(samples: readonly UsageSampleRecord[]): Map<string, UsageSampleRecord[]> {
  const groups = new Map<string, UsageSampleRecord[]>();
  const seen = new Set<string>();
  for (const s of samples) {
    const key = sampleKey(s.databaseId, s.sampleId);
    if (seen.has(key)) continue;
    seen.add(key);
    groups.set(s.databaseId, [...(groups.get(s.databaseId) ?? []), s]);
  }
  for (const group of groups.values()) group.sort(byChain);
  return groups;
}

/** Accrues one database's new samples (in chain order) under its lock; returns the months it changed. */
async function accrue(db: pg.PoolClient, added: readonly UsageSampleRecord[], maxGapMs: number): Promise<MonthKey[]> {
  const { databaseId, organizationId } = added[0]!;
  const isNew = new Set(added.map((s) => s.sampleId));
  const window = await storageWindow(db, databaseId, added[0]!, added[added.length - 1]!);
  const storage = storageDelta(window, (p) => isNew.has(p.sampleId), maxGapMs);

  const epochs = await readEpochs(db, databaseId, [...new Set(added.map((s) => s.countersEpoch))]);
  const transfer = transferDeltas(added, epochs);
  await writeEpochs(db, databaseId, epochs);

  const months: MonthAccrual[] = [...new Set([...storage.keys(), ...transfer.keys()])].sort().map((period) => ({
    period,
    storageByteMs: storage.get(period) ?? 0n,
    egressBytes: transfer.get(period)?.bytesOut ?? 0n,
    ingressBytes: transfer.get(period)?.bytesIn ?? 0n,
  }));
  await addToMonths(db, organizationId, databaseId, months);
  return months.map((m) => m.period);
}

/**
 * Records a batch of storage and transfer samples in one transaction and
 * returns how many were new. A sample already stored (same database and
 * sample id, whatever else it says) records nothing. Each database's new
 * samples are accrued under its row lock against what is stored: storage from
 * their neighbours in time (late samples fill in where they belong), transfer
 * from the highest counters per epoch. The months they change are scheduled
 * for closing, so usage delivered for a month closed without an invoice is
 * still invoiced. A sample taken before `horizon` (the samples' retention)
 * is ignored, neither stored nor accrued: its neighbours may be purged, so
 * what it would add cannot be known; it is counted as `tooOld`.
 */
export async function recordUsageSamples(
  pool: pg.Pool,
  samples: readonly UsageSampleRecord[],
  maxGapMs: number,
  horizon: Date,
): Promise<{ recorded: number; tooOld: number }> {
  const fresh = samples.filter((s) => s.sampledAt >= horizon);
  const tooOld = samples.length - fresh.length;
  if (fresh.length === 0) return { recorded: 0, tooOld };
  const groups = groupByDatabase(fresh);
  const recorded = await withTransaction(pool, async (db) => {
    // A database's first row is seeded with its latest sample in the batch (all of them are new then).
    await lockMeteredDatabases(
      db,
      [...groups.values()].map((g) => g[g.length - 1]!),
    );
    const stored = await insertSamples(db, [...groups.values()].flat());
    const changed = new Map<string, MonthKey>();
    // Only a new sample may move a database's latest: a resent one may say something else.
    const latest: UsageSampleRecord[] = [];
    for (const group of groups.values()) {
      const added = group.filter((s) => stored.has(sampleKey(s.databaseId, s.sampleId)));
      if (added.length === 0) continue;
      latest.push(added[added.length - 1]!);
      const months = await accrue(db, added, maxGapMs);
      const org = added[0]!.organizationId;
      const earliest = months[0];
      const scheduled = changed.get(org);
      if (earliest !== undefined && (scheduled === undefined || earliest < scheduled)) changed.set(org, earliest);
    }
    await advanceLatest(db, latest);
    await scheduleMonths(db, changed);
    return stored.size;
  });
  return { recorded, tooOld };
}
