import { hostname } from "node:os";
import { resolve } from "node:path";
import { ConfigError, envInt, envList, envString, requireEnv } from "@dbaas/kit";

export interface Config {
  agentId: string;
  regions: string[];
  capacity: number;
  portRangeStart: number;
  portRangeEnd: number;
  /** Port of the agent's own Connect server (status for operators). */
  port: number;
  dataDir: string;
  databasesUrl: string;
  internalSecret: string;
  /** Unprivileged OS user PostgreSQL runs as when the agent runs as root. */
  runAsUser: string;
  /** Address instances listen on for clients. */
  listenAddress: string;
  /** Period of full reports (heartbeat) and of re-observing every instance. */
  reportIntervalMs: number;
  /** How many instances are worked on at once. */
  concurrency: number;
}

function parseRange(raw: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(raw);
  if (!m) throw new ConfigError(`AGENT_PORT_RANGE must look like 15400-15599, got "${raw}"`);
  return [Number(m[1]), Number(m[2])];
}

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  const agentId = envString(
    env,
    "AGENT_ID",
    `agent-${hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")}`,
  );
  const [portRangeStart, portRangeEnd] = parseRange(envString(env, "AGENT_PORT_RANGE", "15400-15599"));
  return {
    agentId,
    regions: envList(env, "AGENT_REGIONS", ["fsn1"]),
    capacity: envInt(env, "AGENT_CAPACITY", portRangeEnd - portRangeStart + 1),
    portRangeStart,
    portRangeEnd,
    port: envInt(env, "PORT", 8090),
    dataDir: resolve(envString(env, "AGENT_DATA_DIR", `.dbaas/agents/${agentId}`)),
    databasesUrl: requireEnv(env, "DATABASES_URL"),
    internalSecret: requireEnv(env, "INTERNAL_AUTH_SECRET"),
    runAsUser: envString(env, "AGENT_RUN_AS_USER", "nobody"),
    listenAddress: envString(env, "AGENT_LISTEN_ADDRESS", "127.0.0.1"),
    reportIntervalMs: envInt(env, "AGENT_REPORT_INTERVAL_MS", 3000),
    concurrency: envInt(env, "AGENT_CONCURRENCY", 4),
  };
}
