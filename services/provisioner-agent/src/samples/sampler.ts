import { randomBytes } from "node:crypto";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Clock, Logger } from "@dbaas/kit";
import { type InstanceSample, InstanceSampleSchema } from "@dbaas/proto/agent";
import { type InstanceAccess, withAgentSession } from "../instance-access.ts";
import { pgStats, replicationStats, walArchiveLagSeconds } from "./measure.ts";

/** A database's proxied bytes since `epoch` began (the connection proxy's counters). */
export interface ByteCounters {
  epoch: string;
  bytesIn: bigint;
  bytesOut: bigint;
}

export interface SamplerOptions {
  /** How the sampler reaches an instance: its server's usage, the agent's session, its WAL spool. */
  instances: Pick<InstanceAccess, "agentConnection" | "usage" | "walSpoolRoot">;
  /** Ids of the instances that exist; only running ones are sampled. */
  list(): Promise<string[]>;
  /**
   * The proxy's byte counters of these databases, read once a round; a
   * database without them (not served yet) is sampled in a later round.
   * Without this option the bytes are 0 in epoch "". A failed read fails the
   * round: it is retried, never reported as zeros.
   */
  counters?: (ids: string[]) => Promise<ReadonlyMap<string, ByteCounters>>;
  /** Delivers one batch (ReportSamples); throws when it was not delivered. */
  send(samples: InstanceSample[]): Promise<void>;
  clock: Clock;
  log: Logger;
  /** Samples kept for delivery through an outage; the oldest go first beyond it. */
  maxPending?: number;
  /** Samples per ReportSamples call. */
  batchSize?: number;
}

/**
 * The agent's sampler (docs/product.md, Metrics; issue 13 "Samples and billing"):
 * every interval it measures each running instance and reports the samples.
 * Sample ids are `<process epoch>-<seq>`, unique per database because the
 * process epoch is new at every agent start. Samples not delivered stay
 * pending (bounded) and go with the next round, oldest first; the databases
 * service ignores one it already has, so a resend after a lost answer is
 * harmless.
 */
export function createSampler(o: SamplerOptions) {
  const processEpoch = `${o.clock.now().getTime().toString(36)}${randomBytes(3).toString("hex")}`;
  const maxPending = o.maxPending ?? 10_000;
  const batchSize = o.batchSize ?? 500;
  let seq = 0;
  const lastCpu = new Map<string, { at: number; seconds: number }>();
  let pending: InstanceSample[] = [];

  /** One running instance's sample now, or undefined if it is not running (or stopped while being measured). */
  async function measure(id: string, bytes: ByteCounters | undefined): Promise<InstanceSample | undefined> {
    // Running but not served yet (its start is between the server's start and the meter's serve): no epoch to
    // report, and billing refuses a sample without one; the next round has it.
    if (o.counters && !bytes) return undefined;
    const usage = await o.instances.usage(id);
    if (!usage) return undefined;
    const conn = await o.instances.agentConnection(id);
    if (!conn) return undefined;
    const stats = await withAgentSession(
      conn,
      async (c) => ({ ...(await pgStats(c, conn.user)), ...(await replicationStats(c)) }),
      3000,
    ).catch(() => undefined);
    if (!stats) return undefined;
    const now = o.clock.now();
    // CPU is a rate: the first sample after a (re)start has nothing to compare with and reports 0.
    const prev = lastCpu.get(id);
    lastCpu.set(id, { at: now.getTime(), seconds: usage.cpuSeconds });
    const elapsed = prev ? (now.getTime() - prev.at) / 1000 : 0;
    const cpuPercent = prev && elapsed > 0 && usage.cpuSeconds >= prev.seconds ? ((usage.cpuSeconds - prev.seconds) / elapsed) * 100 : 0;
    return create(InstanceSampleSchema, {
      databaseId: id,
      sampleId: `${processEpoch}-${++seq}`,
      sampledAt: timestampFromDate(now),
      countersEpoch: bytes?.epoch ?? "",
      networkBytesIn: bytes?.bytesIn ?? 0n,
      networkBytesOut: bytes?.bytesOut ?? 0n,
      storageBytes: BigInt(usage.storageBytes),
      cpuPercent,
      memoryBytes: BigInt(usage.memoryBytes),
      ...stats,
      walArchiveLagSeconds: await walArchiveLagSeconds(path.join(o.instances.walSpoolRoot, id), now),
    });
  }

  /** Samples of every running instance now. */
  async function collect(): Promise<InstanceSample[]> {
    const ids = await o.list();
    for (const id of lastCpu.keys()) if (!ids.includes(id)) lastCpu.delete(id);
    const counters = await o.counters?.(ids);
    const out: InstanceSample[] = [];
    for (const id of ids) {
      const s = await measure(id, counters?.get(id)).catch((e: unknown) => {
        o.log.warn("sampling failed", { database_id: id, error: e });
        return undefined;
      });
      if (s) out.push(s);
      else lastCpu.delete(id);
    }
    return out;
  }

  /** Sends what is pending, a batch at a time; false when a batch was not delivered (it stays pending). */
  async function flush(): Promise<boolean> {
    while (pending.length > 0) {
      const batch = pending.slice(0, batchSize);
      try {
        await o.send(batch);
      } catch (e) {
        o.log.warn("sample report failed; kept for the next round", { pending: pending.length, error: e });
        return false;
      }
      pending = pending.slice(batch.length);
    }
    return true;
  }

  /** One round: measure, queue (dropping the oldest beyond the bound), deliver. */
  async function round(): Promise<boolean> {
    pending.push(...(await collect()));
    if (pending.length > maxPending) pending = pending.slice(pending.length - maxPending);
    return flush();
  }

  return {
    collect,
    round,
    /** Samples waiting for delivery. */
    pending: () => pending.length,
    /** Rounds every `intervalMs` until `signal` aborts. */
    async run(intervalMs: number, signal: AbortSignal): Promise<void> {
      while (!signal.aborted) {
        await round().catch((e: unknown) => o.log.warn("sampling round failed", { error: e }));
        await sleep(intervalMs, undefined, { signal }).catch(() => {});
      }
    },
  };
}
