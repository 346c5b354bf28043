import { readFile, rename, rm, writeFile } from "node:fs/promises";
import type { Logger } from "@dbaas/kit";
import type { GatewayRedisClient, RedisLink } from "./redis.ts";

/**
 * The maintenance switch: one Redis key that every gateway process polls —
 * and, for a stack without Redis (the local one), a file named by
 * MAINTENANCE_FILE — set and cleared with `npm run maintenance`
 * (`src/cli/maintenance.ts`). While it is on, every /v1 request is answered
 * 503 maintenance_mode with Retry-After.
 */
export interface MaintenanceState {
  on: boolean;
  /** Seconds clients are told to wait. */
  retryAfter: number;
}

export interface MaintenanceSwitch {
  state(): MaintenanceState;
  close(): void;
}

const OFF: MaintenanceState = { on: false, retryAfter: 0 };

const maintenanceKey = (prefix: string) => `${prefix}maintenance`;
const switchValue = (retryAfter: number) => JSON.stringify({ retry_after: retryAfter, since: new Date().toISOString() });

function parse(value: string | null): MaintenanceState {
  if (value === null) return OFF;
  let retryAfter = Number.NaN;
  try {
    retryAfter = Number((JSON.parse(value) as { retry_after?: unknown }).retry_after);
  } catch {
    // Whatever an operator wrote by hand, the key's presence means on.
  }
  return { on: true, retryAfter: Number.isInteger(retryAfter) && retryAfter > 0 ? retryAfter : 60 };
}

export async function setMaintenance(client: GatewayRedisClient, prefix: string, on: boolean, retryAfter = 60) {
  if (on) {
    await client.set(maintenanceKey(prefix), switchValue(retryAfter));
  } else {
    await client.del(maintenanceKey(prefix));
  }
}

export async function readMaintenance(client: GatewayRedisClient, prefix: string): Promise<MaintenanceState> {
  return parse(await client.get(maintenanceKey(prefix)));
}

/** The file form of the switch: present means on (renamed into place, so a reader never sees half of it). */
export async function setMaintenanceFile(file: string, on: boolean, retryAfter = 60): Promise<void> {
  if (!on) {
    await rm(file, { force: true });
    return;
  }
  await writeFile(`${file}.tmp`, switchValue(retryAfter));
  await rename(`${file}.tmp`, file);
}

export async function readMaintenanceFile(file: string): Promise<MaintenanceState> {
  try {
    return parse(await readFile(file, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return OFF;
    throw err;
  }
}

/**
 * Polls `read` every `intervalMs` so requests read the switch without a round
 * trip. `read` answers undefined (or throws) when it cannot tell: then the
 * last known state holds — an operator who switched maintenance on does not
 * want it lifted by an outage.
 */
function pollSwitch(read: () => Promise<MaintenanceState | undefined>, log: Logger, intervalMs: number, fields = {}): MaintenanceSwitch {
  let current = OFF;
  const poll = async () => {
    try {
      const next = await read();
      if (next === undefined) return;
      if (next.on !== current.on) log.warn(next.on ? "maintenance mode on" : "maintenance mode off", fields);
      current = next;
    } catch {
      // The last known state holds.
    }
  };
  void poll();
  const timer = setInterval(() => void poll(), intervalMs);
  timer.unref();
  return { state: () => current, close: () => clearInterval(timer) };
}

/** Polls the file form of the switch; an unreadable file keeps the last known state. */
export function watchMaintenanceFile(file: string, log: Logger, intervalMs = 1_000): MaintenanceSwitch {
  return pollSwitch(() => readMaintenanceFile(file), log, intervalMs, { file });
}

/** On while any of `switches` is on (a gateway reading both Redis and a file), with the longest Retry-After. */
export function eitherMaintenance(...switches: MaintenanceSwitch[]): MaintenanceSwitch {
  return {
    state() {
      const on = switches.map((s) => s.state()).filter((s) => s.on);
      return on.length === 0 ? OFF : { on: true, retryAfter: Math.max(...on.map((s) => s.retryAfter)) };
    },
    close: () => {
      for (const s of switches) s.close();
    },
  };
}

/** Without Redis there is no switch to read: never in maintenance. */
export const noMaintenance: MaintenanceSwitch = { state: () => OFF, close: () => {} };

/** The Redis form of the switch; while Redis is unreachable (marked down by run()) the last known state holds. */
export function watchMaintenance(link: RedisLink, prefix: string, log: Logger, intervalMs = 1_000): MaintenanceSwitch {
  return pollSwitch(async () => (link.usable() ? await link.run((client) => readMaintenance(client, prefix)) : undefined), log, intervalMs);
}
