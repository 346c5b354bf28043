import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@dbaas/kit";
import { DesiredState, type InstanceSpec } from "@dbaas/proto/agent";
import type { InstanceRuntime, PoolerSettings } from "./runtime.ts";

/*
 * Keeps each database's pooler as its spec says (docs/product.md, Trusted sources and connection
 * pooling): running while the database is desired running, its server runs and the pooler is
 * enabled; stopped otherwise (a stopped, deleted or disabled database's port refuses). Every pass
 * (at once after a snapshot, then every POOLER_PASS_MS) looks at the real processes, so a PgBouncer
 * killed -9 is started again within a pass, and one left running by an agent that was killed is
 * kept. Pooler state of databases no longer assigned here is removed.
 */

export const POOLER_PASS_MS = 2000;

export interface PoolerKeeper {
  setDesired(specs: readonly InstanceSpec[]): void;
  /** Resolves after a whole pass that started after this call. */
  pass(): Promise<void>;
  run(signal: AbortSignal, intervalMs?: number): Promise<void>;
}

const MODES = new Set(["transaction", "session"]);

function settingsOf(spec: InstanceSpec): PoolerSettings | undefined {
  const p = spec.pooler;
  if (!p?.enabled || spec.desiredState !== DesiredState.RUNNING || spec.replicaOf || !MODES.has(p.mode) || p.port <= 0) return undefined;
  return {
    mode: p.mode as PoolerSettings["mode"],
    poolSize: p.poolSize,
    maxClientConnections: p.maxClientConnections,
    port: p.port,
    host: p.host,
    scramVerifier: spec.scramVerifier,
  };
}

export function createPoolerKeeper(o: { runtime: InstanceRuntime; log: Logger }): PoolerKeeper {
  const { runtime, log } = o;
  let desired: readonly InstanceSpec[] | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  const failing = new Map<string, string>();

  async function passOnce(): Promise<void> {
    if (!runtime.syncPooler || !desired) return;
    const specs = desired;
    const assigned = new Set(specs.map((s) => s.databaseId));
    for (const spec of specs) {
      const id = spec.databaseId;
      try {
        const status = await runtime.syncPooler(id, settingsOf(spec));
        const problem = settingsOf(spec) && !status.running ? (status.message ?? "not running") : "";
        if (problem && problem !== "its server is not running" && failing.get(id) !== problem)
          log.warn("pooler not running", { database_id: id, reason: problem });
        if (!problem && failing.has(id)) log.info("pooler running again", { database_id: id });
        if (problem) failing.set(id, problem);
        else failing.delete(id);
      } catch (err) {
        const msg = (err as Error).message;
        if (failing.get(id) !== msg) log.warn("pooler not synced; retrying", { database_id: id, error: msg });
        failing.set(id, msg);
      }
    }
    for (const id of (await runtime.listPoolers?.()) ?? []) {
      if (assigned.has(id)) continue;
      await runtime.removePooler?.(id).catch((err: unknown) => log.warn("pooler not removed", { database_id: id, error: err }));
    }
  }

  /** Passes run one at a time; a request during one runs another after it. */
  function pass(): Promise<void> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await passOnce();
      } while (again);
    })().finally(() => (running = undefined));
    return running;
  }

  return {
    setDesired(specs) {
      desired = specs;
      void pass();
    },
    pass: async () => {
      await running;
      await pass();
    },
    async run(signal, intervalMs = POOLER_PASS_MS) {
      if (!runtime.syncPooler) return;
      while (!signal.aborted) {
        await sleep(intervalMs, undefined, { signal }).catch(() => {});
        if (signal.aborted) break;
        await pass();
      }
      await running;
    },
  };
}
