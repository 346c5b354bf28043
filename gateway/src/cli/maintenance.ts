/**
 * Switches maintenance mode for every gateway sharing a Redis:
 *   REDIS_URL=redis://… tsx gateway/src/cli/maintenance.ts on [--retry-after <seconds>]
 *   REDIS_URL=redis://… tsx gateway/src/cli/maintenance.ts off | status
 * REDIS_KEY_PREFIX must match the gateways' (default "gw:"). Gateways notice within a second.
 */
import { envString, requireEnv } from "@dbaas/kit";
import { readMaintenance, setMaintenance } from "../maintenance.ts";
import { createRedisClient } from "../redis.ts";

const USAGE = "usage: maintenance.ts on [--retry-after <seconds>] | off | status";

function retryAfter(args: string[]): number {
  const i = args.indexOf("--retry-after");
  if (i < 0) return 60;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 1) throw new Error("--retry-after needs a positive whole number of seconds");
  return n;
}

async function run(args: string[]): Promise<string> {
  const [command, ...rest] = args;
  if (command !== "on" && command !== "off" && command !== "status") throw new Error(USAGE);
  const prefix = envString(process.env, "REDIS_KEY_PREFIX", "gw:");
  const client = createRedisClient(requireEnv(process.env, "REDIS_URL"), false);
  client.on("error", () => {});
  await client.connect();
  try {
    if (command !== "status") await setMaintenance(client, prefix, command === "on", retryAfter(rest));
    const state = await readMaintenance(client, prefix);
    return state.on ? `maintenance mode is on (Retry-After: ${state.retryAfter} s)` : "maintenance mode is off";
  } finally {
    client.destroy();
  }
}

run(process.argv.slice(2)).then(
  (line) => console.log(line),
  (err: unknown) => {
    console.error((err as Error).message);
    process.exit(1);
  },
);
