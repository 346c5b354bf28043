import type pg from "pg";
import type { Counters, StoragePoint } from "../metering/accrual.ts";
import type { MonthKey } from "../months.ts";

type Db = pg.Pool | pg.PoolClient;

/** A storage and transfer sample as stored. */
export interface UsageSampleRecord {
  organizationId: string;
  databaseId: string;
  sampleId: string;
  sampledAt: Date;
  storageBytes: bigint;
  countersEpoch: string;
  bytesIn: bigint;
  bytesOut: bigint;
}

/**
 * Makes sure each database has its metered_databases row and locks them, in
 * id order so that concurrent batches cannot deadlock: the rest of a batch's
 * work on a database is done under this lock. `latest` seeds a new row.
 */
export async function lockMeteredDatabases(db: pg.PoolClient, latest: readonly UsageSampleRecord[]): Promise<void> {
  const sorted = [...latest].sort((a, b) => (a.databaseId < b.databaseId ? -1 : a.databaseId > b.databaseId ? 1 : 0));
  await db.query(
    `INSERT INTO metered_databases (database_id, organization_id, latest_sampled_at, latest_sample_id, latest_storage_bytes)
     SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::bigint[])
     ON CONFLICT (database_id) DO NOTHING`,
    [
      sorted.map((s) => s.databaseId),
      sorted.map((s) => s.organizationId),
      sorted.map((s) => s.sampledAt.toISOString()),
      sorted.map((s) => s.sampleId),
      sorted.map((s) => s.storageBytes.toString()),
    ],
  );
  await db.query("SELECT 1 FROM metered_databases WHERE database_id = ANY ($1::text[]) ORDER BY database_id FOR UPDATE", [
    sorted.map((s) => s.databaseId),
  ]);
}

/** Moves each database's latest sample forward to the one given, when that one is later. */
export async function advanceLatest(db: pg.PoolClient, latest: readonly UsageSampleRecord[]): Promise<void> {
  await db.query(
    `UPDATE metered_databases m
        SET latest_sampled_at = l.sampled_at, latest_sample_id = l.sample_id, latest_storage_bytes = l.storage_bytes
       FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[]) AS l(database_id, sampled_at, sample_id, storage_bytes)
      WHERE m.database_id = l.database_id AND (m.latest_sampled_at, m.latest_sample_id) < (l.sampled_at, l.sample_id)`,
    [
      latest.map((s) => s.databaseId),
      latest.map((s) => s.sampledAt.toISOString()),
      latest.map((s) => s.sampleId),
      latest.map((s) => s.storageBytes.toString()),
    ],
  );
}

/** Stores the samples not seen before ((database_id, sample_id); the first copy wins) and returns their keys. */
export async function insertSamples(db: pg.PoolClient, samples: readonly UsageSampleRecord[]): Promise<Set<string>> {
  const { rows } = await db.query<{ database_id: string; sample_id: string }>(
    `INSERT INTO usage_samples
       (organization_id, database_id, sample_id, sampled_at, storage_bytes, counters_epoch, network_bytes_in, network_bytes_out)
     SELECT s.organization_id, s.database_id, s.sample_id, s.sampled_at, s.storage_bytes, s.counters_epoch, s.bytes_in, s.bytes_out
       FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $7::bigint[], $8::bigint[])
            WITH ORDINALITY AS s(organization_id, database_id, sample_id, sampled_at, storage_bytes, counters_epoch, bytes_in, bytes_out, ord)
      ORDER BY s.ord
     ON CONFLICT (database_id, sample_id) DO NOTHING
     RETURNING database_id, sample_id`,
    [
      samples.map((s) => s.organizationId),
      samples.map((s) => s.databaseId),
      samples.map((s) => s.sampleId),
      samples.map((s) => s.sampledAt.toISOString()),
      samples.map((s) => s.storageBytes.toString()),
      samples.map((s) => s.countersEpoch),
      samples.map((s) => s.bytesIn.toString()),
      samples.map((s) => s.bytesOut.toString()),
    ],
  );
  return new Set(rows.map((r) => sampleKey(r.database_id, r.sample_id)));
}

/**
 * Deletes up to `limit` samples taken before `before`, oldest first, and
 * returns how many: one bounded statement, so the purge holds no long locks.
 */
export async function deleteSamplesBefore(db: Db, before: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM usage_samples WHERE (database_id, sample_id) IN (
       SELECT database_id, sample_id FROM usage_samples WHERE sampled_at < $1 ORDER BY sampled_at LIMIT $2)`,
    [before.toISOString(), limit],
  );
  return rowCount ?? 0;
}

export const sampleKey = (databaseId: string, sampleId: string) => `${databaseId}\u0000${sampleId}`;

/**
 * A database's stored samples from the last one before `first` to the first
 * one after `last` (both inclusive of themselves), in chain order.
 */
export async function storageWindow(db: Db, databaseId: string, first: StoragePoint, last: StoragePoint): Promise<StoragePoint[]> {
  const { rows } = await db.query<{ sample_id: string; sampled_at: Date; storage_bytes: string }>(
    `(SELECT sample_id, sampled_at, storage_bytes FROM usage_samples
       WHERE database_id = $1 AND (sampled_at, sample_id) < ($2::timestamptz, $3)
       ORDER BY sampled_at DESC, sample_id DESC LIMIT 1)
     UNION ALL
     (SELECT sample_id, sampled_at, storage_bytes FROM usage_samples
       WHERE database_id = $1 AND (sampled_at, sample_id) >= ($2::timestamptz, $3) AND (sampled_at, sample_id) <= ($4::timestamptz, $5))
     UNION ALL
     (SELECT sample_id, sampled_at, storage_bytes FROM usage_samples
       WHERE database_id = $1 AND (sampled_at, sample_id) > ($4::timestamptz, $5)
       ORDER BY sampled_at, sample_id LIMIT 1)
     ORDER BY sampled_at, sample_id`,
    [databaseId, first.sampledAt.toISOString(), first.sampleId, last.sampledAt.toISOString(), last.sampleId],
  );
  return rows.map((r) => ({ sampleId: r.sample_id, sampledAt: r.sampled_at, storageBytes: BigInt(r.storage_bytes) }));
}

/** The highest counters stored for the database's `epochs` (epochs never seen are absent). */
export async function readEpochs(db: Db, databaseId: string, epochs: readonly string[]): Promise<Map<string, Counters>> {
  const { rows } = await db.query<{ counters_epoch: string; network_bytes_in: string; network_bytes_out: string }>(
    `SELECT counters_epoch, network_bytes_in, network_bytes_out FROM transfer_epochs
      WHERE database_id = $1 AND counters_epoch = ANY ($2::text[])`,
    [databaseId, epochs],
  );
  return new Map(rows.map((r) => [r.counters_epoch, { bytesIn: BigInt(r.network_bytes_in), bytesOut: BigInt(r.network_bytes_out) }]));
}

export async function writeEpochs(db: Db, databaseId: string, epochs: Map<string, Counters>): Promise<void> {
  const entries = [...epochs];
  await db.query(
    `INSERT INTO transfer_epochs (database_id, counters_epoch, network_bytes_in, network_bytes_out)
     SELECT $1, e.epoch, e.bytes_in, e.bytes_out FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS e(epoch, bytes_in, bytes_out)
     ON CONFLICT (database_id, counters_epoch)
     DO UPDATE SET network_bytes_in = excluded.network_bytes_in, network_bytes_out = excluded.network_bytes_out`,
    [databaseId, entries.map(([e]) => e), entries.map(([, c]) => c.bytesIn.toString()), entries.map(([, c]) => c.bytesOut.toString())],
  );
}

/** What one database accrued in one month, to add to what is stored. */
export interface MonthAccrual {
  period: MonthKey;
  storageByteMs: bigint;
  egressBytes: bigint;
  ingressBytes: bigint;
}

export async function addToMonths(db: Db, organizationId: string, databaseId: string, months: readonly MonthAccrual[]): Promise<void> {
  if (months.length === 0) return;
  await db.query(
    `INSERT INTO metered_months AS m (organization_id, period, database_id, storage_byte_ms, egress_bytes, ingress_bytes)
     SELECT $1, a.period, $2, a.storage, a.egress, a.ingress
       FROM unnest($3::date[], $4::numeric[], $5::numeric[], $6::numeric[]) AS a(period, storage, egress, ingress)
     ON CONFLICT (organization_id, period, database_id) DO UPDATE
        SET storage_byte_ms = m.storage_byte_ms + excluded.storage_byte_ms,
            egress_bytes = m.egress_bytes + excluded.egress_bytes,
            ingress_bytes = m.ingress_bytes + excluded.ingress_bytes`,
    [
      organizationId,
      databaseId,
      months.map((m) => m.period),
      months.map((m) => m.storageByteMs.toString()),
      months.map((m) => m.egressBytes.toString()),
      months.map((m) => m.ingressBytes.toString()),
    ],
  );
}

/** An organization's metered storage and egress in one month. */
export interface MeteredMonth {
  storageByteMs: bigint;
  egressBytes: bigint;
}

/** The organization's metered months within [from, until), by month key; months without samples are absent. */
export async function readMeteredMonths(db: Db, organizationId: string, from: Date, until: Date): Promise<Map<MonthKey, MeteredMonth>> {
  const { rows } = await db.query<{ period: string; storage: string; egress: string }>(
    `SELECT to_char(period, 'YYYY-MM-DD') AS period, sum(storage_byte_ms)::text AS storage, sum(egress_bytes)::text AS egress
       FROM metered_months
      WHERE organization_id = $1 AND period >= $2::date AND period < $3::date
      GROUP BY period`,
    [organizationId, from.toISOString().slice(0, 10), until.toISOString().slice(0, 10)],
  );
  return new Map(rows.map((r) => [r.period, { storageByteMs: BigInt(r.storage), egressBytes: BigInt(r.egress) }]));
}

/**
 * Bytes the organization stores now: each live database's latest sample,
 * summed. A database whose last status billing holds is deleted or purged is
 * not live, whatever its last sample said.
 */
export async function storedBytesNow(db: Db, organizationId: string): Promise<bigint> {
  const { rows } = await db.query<{ bytes: string }>(
    `SELECT coalesce(sum(m.latest_storage_bytes), 0)::text AS bytes
       FROM metered_databases m
      WHERE m.organization_id = $1
        AND coalesce((SELECT s.status FROM status_events s
                       WHERE s.organization_id = m.organization_id AND s.database_id = m.database_id
                       ORDER BY s.occurred_at DESC, s.seq DESC LIMIT 1), '') NOT IN ('deleted', 'purged')`,
    [organizationId],
  );
  return BigInt(rows[0]!.bytes);
}
