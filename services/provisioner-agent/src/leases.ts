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
  for (const id of ids) {
    await runtime.fence(id).catch((e: unknown) => log.warn("could not fence a primary at start", { database_id: id, error: e }));
  }
  if (ids.length > 0) log.info("primaries fenced until their leases are renewed", { database_ids: ids });
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

  async function pass(): Promise<void> {
    const t = now();
    const ids = new Set([...required.keys(), ...forced, ...unknown, ...fencedByUs]);
    for (const id of ids) {
      const fenced = o.runtime.isFenced(id);
      try {
        if (shouldFence(id, t)) {
          if (fenced && t - (lastVerified.get(id) ?? 0) < VERIFY_MS) continue;
          await o.runtime.fence(id);
          fencedByUs.add(id);
          lastVerified.set(id, t);
          if (!fenced) {
            o.log.warn("primary fenced: no client sessions until its lease is renewed", {
              database_id: id,
              reason: forced.has(id) ? "switchover or discard" : "no lease",
            });
            o.onFencingChanged(id);
          }
        } else {
          lastVerified.delete(id);
          fencedByUs.delete(id);
          if (!fenced) continue;
          await o.runtime.unfence(id);
          o.log.info("primary unfenced: its lease holds", { database_id: id });
          o.onFencingChanged(id);
        }
      } catch (e) {
        o.log.warn("fencing step failed; will retry", { database_id: id, error: e });
      }
    }
  }

  async function renewOnce(): Promise<void> {
    const sentAt = now();
    const res = await o.renew();
    const granted = new Set(res.databaseIds);
    for (const id of granted) until.set(id, sentAt + res.leaseMillis);
    for (const id of [...until.keys()]) if (!granted.has(id)) until.delete(id);
    lastGrant = sentAt;
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
