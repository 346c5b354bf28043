import type { HandlerContext } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { callerKey, Validator } from "@dbaas/kit";
import { RecordUsageSamplesResponseSchema, type RecordUsageSamplesRequest, type RecordUsageSamplesResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import type { UsageSampleRecord } from "../db/usage-samples.ts";
import { recordUsageSamples as record } from "../metering/ingest.ts";
import { sampleHorizon } from "../metering/retention.ts";
import { checkId, checkTimestamp } from "../validation.ts";

/** Bounds one call's transaction; the databases service forwards smaller batches. */
export const MAX_SAMPLES_PER_CALL = 1000;

function checkBytes(v: Validator, field: string, value: bigint): void {
  if (value < 0n) v.add(field, "must not be negative");
}

function validate(req: RecordUsageSamplesRequest): UsageSampleRecord[] {
  const v = new Validator();
  if (req.samples.length === 0) v.add("samples", "must contain at least one sample");
  if (req.samples.length > MAX_SAMPLES_PER_CALL) v.add("samples", `must contain at most ${MAX_SAMPLES_PER_CALL} samples`);
  v.throwIfAny();
  const samples: UsageSampleRecord[] = [];
  req.samples.forEach((s, i) => {
    const at = `samples[${i}]`;
    checkId(v, `${at}.organization_id`, s.organizationId);
    checkId(v, `${at}.database_id`, s.databaseId);
    checkId(v, `${at}.sample_id`, s.sampleId);
    checkId(v, `${at}.counters_epoch`, s.countersEpoch);
    checkBytes(v, `${at}.storage_bytes`, s.storageBytes);
    checkBytes(v, `${at}.network_bytes_in`, s.networkBytesIn);
    checkBytes(v, `${at}.network_bytes_out`, s.networkBytesOut);
    if (checkTimestamp(v, `${at}.sampled_at`, s.sampledAt)) {
      samples.push({
        organizationId: s.organizationId,
        databaseId: s.databaseId,
        sampleId: s.sampleId,
        sampledAt: timestampDate(s.sampledAt),
        storageBytes: s.storageBytes,
        countersEpoch: s.countersEpoch,
        bytesIn: s.networkBytesIn,
        bytesOut: s.networkBytesOut,
      });
    }
  });
  v.throwIfAny();
  return samples;
}

/**
 * Ingests the agents' storage and transfer samples, forwarded by the databases
 * service's outbox. Delivery is at-least-once and unordered: a sample is
 * recorded once per (database_id, sample_id), and what it adds does not
 * depend on arrival order (see metering/ingest.ts). One older than the
 * samples' retention is ignored, and logged; `recorded` does not count it.
 */
export function recordUsageSamples(ctx: AppContext) {
  return async (req: RecordUsageSamplesRequest, call: HandlerContext): Promise<RecordUsageSamplesResponse> => {
    const samples = validate(req);
    const horizon = sampleHorizon(ctx);
    const { recorded, tooOld } = await record(ctx.pool, samples, ctx.storageMaxGapMs, horizon);
    const caller = call.values.get(callerKey);
    ctx.log.info("usage samples recorded", { caller, received: samples.length, recorded });
    if (tooOld > 0) ctx.log.warn("usage samples past retention ignored", { caller, count: tooOld, horizon: horizon.toISOString() });
    return create(RecordUsageSamplesResponseSchema, { recorded });
  };
}
