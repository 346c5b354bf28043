import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError, envInt, envString } from "./config.ts";

type Env = Record<string, string | undefined>;

/** The repository this kit belongs to: the local stack keeps its data below it unless DBAAS_DATA_DIR says otherwise. */
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** One listening port of the local stack and the setting that moves it. */
export interface StackPort {
  name: string;
  setting: string;
  port: number;
}

export interface LocalAgent {
  /** `agent-<first region>`. */
  id: string;
  /** Comma-separated regions it serves. */
  regions: string;
  port: number;
  /** First and last port its PostgreSQL instances may take. */
  instancePorts: [number, number];
}

/**
 * Where `npm start` puts every process, derived from the environment the
 * runner reads — PORT for the gateway and the next ports for the internal
 * services unless their own settings say otherwise. The runner and the
 * operator CLIs both call this, so `PORT=9000 npm run set-plan …` reaches the
 * stack that `PORT=9000 npm start` started.
 */
export interface LocalStackLayout {
  dataDir: string;
  gateway: number;
  identity: number;
  databases: number;
  billing: number;
  /** The embedded metadata PostgreSQL (unused when DATABASE_URL is set). */
  metadata: number;
  agents: LocalAgent[];
  /** Instances per agent. */
  capacity: number;
}

export function localStackLayout(env: Env = process.env): LocalStackLayout {
  const gateway = envInt(env, "PORT", 8080);
  const agentBase = envInt(env, "AGENT_BASE_PORT", gateway + 10);
  const instanceBase = envInt(env, "INSTANCE_PORT_BASE", 15400);
  const capacity = envInt(env, "AGENT_CAPACITY", 200);
  if (capacity < 1) throw new ConfigError(`AGENT_CAPACITY must be at least 1, got ${capacity}`);
  // "fsn1,nbg1,hel1" = one agent serving three regions; "fsn1;nbg1,hel1" = two agents.
  const groups = envString(env, "LOCAL_AGENTS", "fsn1,nbg1,hel1")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    dataDir: resolve(envString(env, "DBAAS_DATA_DIR", join(REPO_ROOT, ".dbaas"))),
    gateway,
    identity: envInt(env, "IDENTITY_PORT", gateway + 1),
    databases: envInt(env, "DATABASES_PORT", gateway + 2),
    billing: envInt(env, "BILLING_PORT", gateway + 3),
    metadata: envInt(env, "METADATA_PG_PORT", 5499),
    capacity,
    agents: groups.map((regions, i) => {
      const first = instanceBase + i * capacity;
      return {
        id: `agent-${regions.split(",")[0]!.trim()}`,
        regions,
        port: agentBase + i,
        instancePorts: [first, first + capacity - 1] as [number, number],
      };
    }),
  };
}

/** `http://127.0.0.1:<port>`: every process of the local stack listens on loopback. */
export const localUrl = (port: number) => `http://127.0.0.1:${port}`;

/** The ports the stack's own processes listen on, each with the setting that moves it. */
export function stackPorts(layout: LocalStackLayout, embeddedMetadata: boolean): StackPort[] {
  return [
    { name: "gateway", setting: "PORT", port: layout.gateway },
    { name: "identity", setting: "IDENTITY_PORT", port: layout.identity },
    { name: "databases", setting: "DATABASES_PORT", port: layout.databases },
    { name: "billing", setting: "BILLING_PORT", port: layout.billing },
    ...layout.agents.map((a) => ({ name: a.id, setting: "AGENT_BASE_PORT", port: a.port })),
    ...(embeddedMetadata ? [{ name: "metadata PostgreSQL", setting: "METADATA_PG_PORT", port: layout.metadata }] : []),
  ];
}

/**
 * What is wrong with a layout before anything starts: two processes on one
 * port, a port outside 1–65535, or a stack port inside an agent's instance
 * range (the agent would hand it to a database and fail to bind). Empty when
 * the layout can run.
 */
export function layoutProblems(layout: LocalStackLayout, embeddedMetadata: boolean): string[] {
  const problems: string[] = [];
  const own = stackPorts(layout, embeddedMetadata);
  const range = `INSTANCE_PORT_BASE + AGENT_CAPACITY × ${layout.agents.length} agent(s)`;
  for (const p of own) {
    if (!Number.isInteger(p.port) || p.port < 1 || p.port > 65535)
      problems.push(`${p.setting}: ${p.name} port ${p.port} is not a port number`);
  }
  for (const [i, p] of own.entries()) {
    const twin = own.slice(0, i).find((q) => q.port === p.port);
    if (twin) problems.push(`${p.name} and ${twin.name} would both listen on port ${p.port}: change ${p.setting} or ${twin.setting}`);
  }
  for (const a of layout.agents) {
    const [first, last] = a.instancePorts;
    if (first < 1 || last > 65535)
      problems.push(`instance ports of ${a.id} (${first}–${last}) leave 1–65535: change INSTANCE_PORT_BASE or AGENT_CAPACITY`);
    for (const p of own) {
      if (p.port >= first && p.port <= last) {
        problems.push(
          `${p.setting}=${p.port} (${p.name}) lies inside the instance ports of ${a.id} (${first}–${last}, from ${range}): ` +
            `move ${p.setting} or INSTANCE_PORT_BASE so they do not overlap`,
        );
      }
    }
  }
  return problems;
}
