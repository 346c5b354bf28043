import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@dbaas/kit";
import { DesiredState, type InstanceSpec } from "@dbaas/proto/agent";
import type { InstanceRuntime } from "./runtime.ts";

/*
 * The agent's leases on its highly available primaries (docs/product.md, High availability). The databases
 * service grants them through RenewLeases, for a lease's length from when the request was SENT (so the agent's
 * lease always ends before the service's own record of it); the service promotes a standby only after its record
 * plus a margin. The keeper renews every AGENT_LEASE_RENEW_MS and fences a primary (runtime.fence: no client
 * sessions) AGENT_LEASE_FENCE_MARGIN_MS before its lease would end unrenewed — so an agent cut off from the
 * control plane has stopped taking writes on its primaries by the time a standby can be promoted. A renewed lease
 * unfences it. A switchover's spec (`fenced`) and an old primary to discard are fenced whatever the lease.
 *
 * The ids to fence are kept on disk: an agent that restarts does not know whether it still holds their leases,
 * so it fences them before anything is served (fenceOnStart) and lets clients back in once a renewal grants them.
 *
 * All of that needs the agent alive. For when it is not (SIGKILLed, hung), the runtime's `armFencing` (the local
 * runtime's watchdog process) is told, after every renewal and every change, each primary that may take writes
 * and when its lease ends: a primary is left out only once its fence is done, and put back (with its new lease)
 * before it is unfenced, so what was published is never more lenient than the servers are.
 */

const FILE = "leases/fence-on-start.json";

/** A primary learned from a spec gets this long for its first renewal before it is fenced for want of a lease. */
const FIRST_GRANT_GRACE_MS = 2000;
/** A fenced instance's fencing is checked again this often (a restart in between reopened its access rules). */
const VERIFY_MS = 2000;
const TICK_MS = 200;

async function loadIds(dataDir: string): Promise<string[]> {
  try {
    const ids = JSON.parse(await readFile(join(dataDir, FILE), "utf8")) as unknown;
    return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}

async function saveIds(dataDir: string, ids: readonly string[]): Promise<void> {
  const file = join(dataDir, FILE);
  await mkdir(join(dataDir, "leases"), { recursive: true });
  await writeFile(`${file}.tmp`, JSON.stringify([...ids].sort()));
  await rename(`${file}.tmp`, file);
}

/**
 * At agent start, before the runtime serves the servers a previous process
 * left running: every primary that needed a lease is fenced until a renewal
 * grants it again. Answers their ids.
 */
export async function fenceOnStart(runtime: InstanceRuntime, dataDir: string, log: Logger): Promise<string[]> {
  const ids = await loadIds(dataDir);
  /** Those this process could not fence: the watchdog stops them at once (their leases are unknown here). */
  const failed = new Map<string, number>();
  for (const id of ids) {
    await runtime.fence(id).catch((e: unknown) => {
      failed.set(id, 0);
      log.warn("could not fence a primary at start", { database_id: id, error: e });
    });
  }
  if (ids.length > 0) log.info("primaries fenced until their leases are renewed", { database_ids: ids });
  // What the previous process published (leases it may have held) is replaced: every one fenced now needs nothing.
  await runtime.armFencing?.(failed).catch((e: unknown) => log.warn("could not tell the watchdog", { error: e }));
  return ids;
}

export interface LeaseKeeperOptions {
  runtime: InstanceRuntime;
  /** One RenewLeases call: the primaries granted and for how long. */
  renew: () => Promise<{ databaseIds: string[]; leaseMillis: number }>;
  log: Logger;
  dataDir: string;
  renewIntervalMs: number;
  fenceMarginMs: number;
  /** The ids fenceOnStart fenced (fenced until granted). */
  fencedAtStart: readonly string[];
  /** An instance's fencing changed (the reconciler reports it at once). */
  onFencingChanged: (id: string) => void;
  /** A monotonic clock in ms (default performance.now). */
  now?: () => number;
}

export function createLeaseKeeper(o: LeaseKeeperOptions) {
  const now = o.now ?? (() => performance.now());
  /** Per primary: until when (monotonic) its lease holds, as granted. */
  const until = new Map<string, number>();
  /** Primaries whose spec needs a lease, with when the keeper first saw that. */
  const required = new Map<string, number>();
  /** Fenced whatever the lease: a switchover's primary, an old primary to discard. */
  let forced = new Set<string>();
  /** Fenced at start and not yet seen in a snapshot. */
  const unknown = new Set(o.fencedAtStart);
  let received = false;
  let saved = JSON.stringify([...o.fencedAtStart].sort());
  const lastVerified = new Map<string, number>();
  /** Every id this keeper (or fenceOnStart) fenced and has not unfenced: candidates for unfencing. */
  const fencedByUs = new Set(o.fencedAtStart);
  let renewNow: (() => void) | undefined;
  let lastGrant = Number.NEGATIVE_INFINITY;
  let failures = 0;
  const startedAt = now();
  /** Ids whose latest fence is done (and no unfence begun since): the only ones the watchdog is not told of. */
  const confirmed = new Set<string>();
  /** Per primary: the end of the last lease it was granted, kept after a renewal omits it (until it is fenced). */
  const lastUntil = new Map<string, number>();
  /** Nothing is published before the first fencing pass has fenced again what was fenced at start. */
  let firstPassDone = false;
  let publishing: Promise<void> = Promise.resolve();
  let published = "";

  const leaseHolds = (id: string, t: number) => (until.get(id) ?? Number.NEGATIVE_INFINITY) - o.fenceMarginMs > t;

  /** Whether `id` must be fenced now. */
  function shouldFence(id: string, t: number): boolean {
    if (forced.has(id)) return true;
    const since = required.get(id);
    if (since === undefined) return unknown.has(id) && !leaseHolds(id, t);
    if (leaseHolds(id, t)) return false;
    // Newly highly available: its first renewal is on its way (asked for at once) — unless one came back without it.
    return !(t - since < FIRST_GRANT_GRACE_MS && lastGrant < since);
  }

  /** When the lease of `id` ends as far as this process knows (its clock): granted, or its first grant's grace. */
  function deadlineOf(id: string): number {
    const lease = until.get(id) ?? lastUntil.get(id);
    if (lease !== undefined) return lease;
    const since = required.get(id);
    return since !== undefined && since !== Number.NEGATIVE_INFINITY ? since + FIRST_GRANT_GRACE_MS + o.fenceMarginMs : startedAt;
  }

  /**
   * The runtime's watchdog told of every primary that may take writes now (not confirmed fenced) and its lease's end;
   * resolves once durable. Calls run one after another; one that changes nothing writes nothing.
   */
  function publish(): Promise<void> {
    const arm = o.runtime.armFencing;
    if (!arm || !firstPassDone) return Promise.resolve();
    const candidates = new Set([...required.keys(), ...forced, ...unknown, ...fencedByUs]);
    for (const id of [...lastUntil.keys()]) if (!candidates.has(id)) lastUntil.delete(id);
    const ends = [...candidates]
      .filter((id) => !confirmed.has(id))
      .sort()
      .map((id) => [id, deadlineOf(id)] as const);
    const key = JSON.stringify(ends);
    const run = publishing
      .catch(() => {})
      .then(async () => {
        if (key === published) return;
        const t = now();
        await arm.call(o.runtime, new Map(ends.map(([id, end]) => [id, end - t])));
        published = key;
      });
    publishing = run;
    return run;
  }

  let ticking: Promise<void> | undefined;
  let again = false;
  /** One fencing pass at a time; a pass asked for meanwhile runs right after. */
  function tick(): Promise<void> {
    if (ticking) {
      again = true;
      return ticking;
    }
    ticking = (async () => {
      do {
        again = false;
        await pass();
      } while (again);
    })().finally(() => (ticking = undefined));
    return ticking;
  }

  /** Fences first, then unfences: the watchdog is told before any server lets clients in again. */
  async function pass(): Promise<void> {
    const t = now();
    const ids = new Set([...required.keys(), ...forced, ...unknown, ...fencedByUs]);
    const toUnfence: string[] = [];
    for (const id of ids) {
      const fenced = o.runtime.isFenced(id);
      if (!shouldFence(id, t)) {
        lastVerified.delete(id);
        fencedByUs.delete(id);
        if (fenced) toUnfence.push(id);
        else confirmed.delete(id);
        continue;
      }
      // Verified again every VERIFY_MS; the first pass of a process fences again whatever it finds.
      const verified = lastVerified.get(id);
      if (fenced && verified !== undefined && t - verified < VERIFY_MS) continue;
      try {
        await o.runtime.fence(id);
        fencedByUs.add(id);
        confirmed.add(id);
        lastVerified.set(id, t);
        if (!fenced) {
          o.log.warn("primary fenced: no client sessions until its lease is renewed", {
            database_id: id,
            reason: forced.has(id) ? "switchover or discard" : "no lease",
          });
          o.onFencingChanged(id);
        }
      } catch (e) {
        confirmed.delete(id);
        o.log.warn("fencing step failed; will retry", { database_id: id, error: e });
      }
    }
    firstPassDone = true;
    if (toUnfence.length > 0) {
      for (const id of toUnfence) confirmed.delete(id);
      try {
        await publish();
      } catch (e) {
        o.log.warn("could not tell the watchdog of renewed leases; primaries stay fenced, will retry", { error: e });
        return;
      }
      for (const id of toUnfence) {
        try {
          await o.runtime.unfence(id);
          o.log.info("primary unfenced: its lease holds", { database_id: id });
          o.onFencingChanged(id);
        } catch (e) {
          o.log.warn("fencing step failed; will retry", { database_id: id, error: e });
        }
      }
    }
    await publish().catch((e: unknown) => o.log.warn("could not tell the watchdog; will retry", { error: e }));
  }

  async function renewOnce(): Promise<void> {
    const sentAt = now();
    const res = await o.renew();
    const granted = new Set(res.databaseIds);
    for (const id of granted) {
      until.set(id, sentAt + res.leaseMillis);
      lastUntil.set(id, sentAt + res.leaseMillis);
    }
    for (const id of [...until.keys()]) if (!granted.has(id)) until.delete(id);
    lastGrant = sentAt;
    // The watchdog learns the longer leases at once (until then it would stop them at the previous lease's end).
    await publish().catch((e: unknown) => o.log.warn("could not tell the watchdog of renewed leases", { error: e }));
  }

  return {
    /** The desired state: which primaries need a lease, which are fenced regardless (switchover, discards). */
    setDesired(specs: readonly InstanceSpec[], discards: readonly string[]): void {
      const t = now();
      const wanted = specs.filter((s) => s.leaseRequired && s.desiredState === DesiredState.RUNNING).map((s) => s.databaseId);
      let added = false;
      for (const id of wanted) {
        if (required.has(id)) continue;
        required.set(id, unknown.has(id) ? Number.NEGATIVE_INFINITY : t);
        added = true;
      }
      for (const id of [...required.keys()]) if (!wanted.includes(id)) required.delete(id);
      forced = new Set([...specs.filter((s) => s.fenced).map((s) => s.databaseId), ...discards]);
      received = true;
      unknown.clear();
      const toSave = JSON.stringify([...new Set([...required.keys(), ...forced])].sort());
      if (toSave !== saved) {
        saved = toSave;
        void saveIds(o.dataDir, JSON.parse(toSave) as string[]).catch((e: unknown) =>
          o.log.warn("could not save the primaries to fence at start", { error: e }),
        );
      }
      if (added) renewNow?.();
      void tick();
    },
    /** Whether the instance is fenced now (its observation says so). */
    isFenced: (id: string) => o.runtime.isFenced(id),
    /** One renewal, as `run` makes every AGENT_LEASE_RENEW_MS (tests drive it by hand with their clock). */
    renewOnce,
    /** One fencing pass, as `run` makes every 200 ms. */
    tick,
    /** Whether a snapshot arrived (until then, what was fenced at start stays fenced). */
    received: () => received,
    /** Renews and fences until `signal` aborts. */
    async run(signal: AbortSignal): Promise<void> {
      const renewals = (async () => {
        while (!signal.aborted) {
          if (required.size + unknown.size > 0) {
            try {
              await renewOnce();
              if (failures > 0) o.log.info("leases renewed again", { after_failures: failures });
              failures = 0;
            } catch (e) {
              if (failures++ % 10 === 0) o.log.warn("lease renewal failed; primaries are fenced when their leases end", { error: e });
            }
            void tick();
          }
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, o.renewIntervalMs);
            renewNow = () => {
              clearTimeout(timer);
              resolve();
            };
            signal.addEventListener("abort", () => resolve(), { once: true });
          });
          renewNow = undefined;
        }
      })();
      const fencing = (async () => {
        while (!signal.aborted) {
          await tick();
          await sleep(TICK_MS, undefined, { signal }).catch(() => {});
        }
      })();
      await Promise.all([renewals, fencing]);
    },
  };
}

export type LeaseKeeper = ReturnType<typeof createLeaseKeeper>;
