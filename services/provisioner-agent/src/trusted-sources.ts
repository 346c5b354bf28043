import { setTimeout as sleep } from "node:timers/promises";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Clock, Logger } from "@dbaas/kit";
import type { InstanceSpec } from "@dbaas/proto/agent";
import type { ConnectionProxy } from "./proxy/counters.ts";
import { admittedAt, type TrustedEntry } from "./proxy/trust.ts";

/*
 * Keeps the meter's trusted sources as the specs say (docs/product.md, Trusted sources and
 * connection pooling). A new snapshot applies at once (the databases service sends one as soon as a
 * list changes: within the 5 s promised); an entry stops admitting at its expires_at by this agent's
 * own timer, whatever the control plane does; every AGENT_TRUST_REPAIR_INTERVAL_MS the meter's rules
 * are written again (in one transaction), so a rule changed or deleted behind the agent's back is
 * repaired. A replica's spec carries its primary's list.
 */

export interface TrustKeeper {
  /** The desired lists: every instance of the snapshot (an instance absent from it admits everyone: it is not served). */
  setDesired(specs: readonly InstanceSpec[]): void;
  /** Resolves once what was last desired is in the meter. */
  settled(): Promise<void>;
  /** The repair loop, until `signal` aborts. */
  run(intervalMs: number, signal: AbortSignal): Promise<void>;
}

const sameList = (a: readonly string[] | undefined, b: readonly string[]) =>
  a !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);

export function createTrustKeeper(o: { proxy: ConnectionProxy; clock: Clock; log: Logger }): TrustKeeper {
  let desired = new Map<string, TrustedEntry[]>();
  const applied = new Map<string, readonly string[]>();
  let timer: NodeJS.Timeout | undefined;
  let tail: Promise<void> = Promise.resolve();
  let failing = false;

  const apply = async (): Promise<void> => {
    const now = o.clock.now();
    let next: Date | undefined;
    for (const id of [...applied.keys()]) {
      if (desired.has(id)) continue;
      await o.proxy.trust(id, []);
      applied.delete(id);
    }
    for (const [id, entries] of desired) {
      const { cidrs, nextChange } = admittedAt(entries, now);
      if (nextChange && (!next || nextChange < next)) next = nextChange;
      // Each database once at least, an empty list included: the meter may hold a list from before a restart.
      if (sameList(applied.get(id), cidrs)) continue;
      await o.proxy.trust(id, cidrs);
      applied.set(id, cidrs);
      if (cidrs.length > 0) o.log.info("trusted sources applied", { database_id: id, sources: cidrs.length });
    }
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (next) {
      // At the instant the first entry expires (a timer cannot wait longer than about 24.8 days: then look again).
      const wait = Math.min(Math.max(0, next.getTime() - o.clock.now().getTime()), 2 ** 31 - 1);
      timer = setTimeout(schedule, wait);
      timer.unref();
    }
  };

  function schedule(): void {
    tail = tail
      .then(apply)
      .then(() => {
        if (failing) o.log.info("trusted sources applied again");
        failing = false;
      })
      .catch((err: unknown) => {
        if (!failing) o.log.warn("trusted sources not applied; retrying", { error: err });
        failing = true;
        // Not left half-applied for long: the repair loop or the next snapshot tries again, and so does this.
        timer = setTimeout(schedule, 1000);
        timer.unref();
      });
  }

  return {
    setDesired(specs) {
      desired = new Map(
        specs.map((s) => [
          s.databaseId,
          s.trustedSources.map((t) => ({ cidr: t.cidr, ...(t.expiresAt && { expiresAt: timestampDate(t.expiresAt) }) })),
        ]),
      );
      schedule();
    },
    settled: () => tail,
    async run(intervalMs, signal) {
      while (!signal.aborted) {
        await sleep(intervalMs, undefined, { signal }).catch(() => {});
        if (signal.aborted) break;
        try {
          await o.proxy.repairTrust();
        } catch (err) {
          o.log.warn("trusted sources' repair failed", { error: err });
        }
        // Expiries are timers; this also catches one that a suspended process slept through.
        schedule();
      }
      if (timer) clearTimeout(timer);
    },
  };
}
