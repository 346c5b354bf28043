/**
 * Switches maintenance mode for every gateway:
 *   npm run maintenance -- on [--retry-after <seconds>] | off | status
 *
 * Where the switch lives: with REDIS_URL set, the Redis key every gateway sharing that Redis polls
 * (REDIS_KEY_PREFIX must match the gateways', default "gw:"). Without it, the local stack's
 * `$DBAAS_DATA_DIR/maintenance.json` (default ./.dbaas), which its gateway watches
 * (MAINTENANCE_FILE, set by `npm start`, with or without Redis); no such directory → refused.
 * Gateways notice within a second. After switching the file, the CLI asks the local gateway's
 * /healthz (URL derived from PORT as `npm start` derives it, or GATEWAY_URL) and fails if a
 * gateway answers there but does not report the new state.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { envString, localStackLayout, localUrl } from "@dbaas/kit";
import { readMaintenance, readMaintenanceFile, setMaintenance, setMaintenanceFile, type MaintenanceState } from "../maintenance.ts";
import { createRedisClient } from "../redis.ts";

const USAGE = "usage: npm run maintenance -- on [--retry-after <seconds>] | off | status";
const env = process.env;

function retryAfter(args: string[]): number {
  const i = args.indexOf("--retry-after");
  if (i < 0) return 60;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 1) throw new Error("--retry-after needs a positive whole number of seconds");
  return n;
}

/** The Redis switch, when REDIS_URL is set: runs `fn` on a fresh connection. */
async function withRedis<T>(fn: (client: ReturnType<typeof createRedisClient>, prefix: string) => Promise<T>): Promise<T> {
  const client = createRedisClient(env.REDIS_URL!, false);
  client.on("error", () => {});
  await client.connect();
  try {
    return await fn(client, envString(env, "REDIS_KEY_PREFIX", "gw:"));
  } finally {
    client.destroy();
  }
}

const describe = (s: MaintenanceState) => (s.on ? `maintenance mode is on (Retry-After: ${s.retryAfter} s)` : "maintenance mode is off");

/** What the gateway at `url` reports, or undefined when none answers there. */
async function gatewaySays(url: string): Promise<boolean | undefined> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
    return ((await res.json()) as { maintenance?: boolean }).maintenance === true;
  } catch {
    return undefined;
  }
}

async function run(args: string[]): Promise<string> {
  const [command, ...rest] = args;
  if (command !== "on" && command !== "off" && command !== "status") throw new Error(USAGE);
  const on = command === "on";
  const seconds = on ? retryAfter(rest) : 60;
  if (env.REDIS_URL) {
    return await withRedis(async (client, prefix) => {
      if (command !== "status") await setMaintenance(client, prefix, on, seconds);
      return describe(await readMaintenance(client, prefix));
    });
  }
  const layout = localStackLayout(env);
  if (!existsSync(layout.dataDir)) {
    throw new Error(
      `no switch to ${command === "status" ? "read" : "set"}: REDIS_URL is unset and there is no local stack at ${layout.dataDir} ` +
        "(set REDIS_URL to the gateways' Redis, or DBAAS_DATA_DIR to the local stack's data directory)",
    );
  }
  const file = join(layout.dataDir, "maintenance.json");
  if (command !== "status") await setMaintenanceFile(file, on, seconds);
  const state = await readMaintenanceFile(file);
  if (command === "status") return describe(state);
  // A file only counts if the gateway reads it: ask the one of this stack.
  const url = env.GATEWAY_URL ?? localUrl(layout.gateway);
  const deadline = Date.now() + 3_000;
  let says = await gatewaySays(url);
  while (says !== undefined && says !== state.on && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    says = await gatewaySays(url);
  }
  if (says === undefined) return `${describe(state)} (no gateway answered at ${url}; a stack started from ${layout.dataDir} will see it)`;
  if (says !== state.on) {
    throw new Error(
      `${describe(state)} in ${file}, but the gateway at ${url} still reports it ${says ? "on" : "off"}: ` +
        "it does not read this switch (started from another DBAAS_DATA_DIR, or not by npm start?)",
    );
  }
  return `${describe(state)} (confirmed by the gateway at ${url})`;
}

run(process.argv.slice(2)).then(
  (line) => console.log(line),
  (err: unknown) => {
    console.error((err as Error).message);
    process.exit(1);
  },
);
