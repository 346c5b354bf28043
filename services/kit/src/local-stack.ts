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
  /** `agent-<first region>`; the second agent with the same first region `agent-<region>-2`, and so on. */
  id: string;
  /**
   * AGENT_PUBLIC_ADDRESS: 127.0.0.1 for every agent, unless the stack keeps DNS
   * records (DNS_PROVIDER=rfc2136): then each agent is a host of its own, the
   * n-th publishing on 127.0.0.(n+1), all with the same instance ports.
   */
  publicAddress: string;
  /** Comma-separated regions it serves. */
  regions: string;
  /**
   * AGENT_POOLER_PORT_OFFSET: a database's pooler is published on its port plus this, past every
   * agent's instance ports (on one address) or past its own (each agent on its own address).
   */
  poolerPortOffset: number;
  port: number;
  /** First and last port its PostgreSQL instances may take. */
  instancePorts: [number, number];
  /**
   * AGENT_TENANT_UID_RANGE: its slice of the runner's range (AGENT_TENANT_UID_RANGE, default 200000-299999), split
   * evenly between the agents, so that no two agents of the stack, all on this one machine, hand out the same uid.
   */
  tenantUids: [number, number];
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
  /**
   * LOCAL_REPLICAS: how many instances of each of gateway, identity, databases
   * and billing run (default 1). With two or more, the service ports below are
   * served by the runner's balancer (deploy/local/balancer.ts) and the
   * instances listen on `instances` instead.
   */
  replicas: number;
  /**
   * Each scaled service's instances' ports, the first instance first. With one
   * replica, the service's own port; with more, REPLICA_BASE_PORT (default
   * PORT + 20) onwards: the gateways', then identity's, databases', billing's.
   */
  instances: Record<ScaledService, number[]>;
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

/** The services the local stack can run several instances of (LOCAL_REPLICAS). */
export const SCALED_SERVICES = ["gateway", "identity", "databases", "billing"] as const;
export type ScaledService = (typeof SCALED_SERVICES)[number];

/** The most instances of each service LOCAL_REPLICAS may ask for: the stack shares one machine. */
export const MAX_LOCAL_REPLICAS = 4;

/** The runner's name for instance `n` (1-based) of a service: `databases`, `databases-2`, … (its pid file, its log label). */
export const instanceName = (service: ScaledService, n: number) => (n === 1 ? service : `${service}-${n}`);

export function localStackLayout(env: Env = process.env): LocalStackLayout {
  const gateway = envInt(env, "PORT", 8080);
  const replicas = envInt(env, "LOCAL_REPLICAS", 1);
  const replicaBase = envInt(env, "REPLICA_BASE_PORT", gateway + 20);
  const agentBase = envInt(env, "AGENT_BASE_PORT", gateway + 10);
  const instanceBase = envInt(env, "INSTANCE_PORT_BASE", 15400);
  const capacity = envInt(env, "AGENT_CAPACITY", 200);
  if (capacity < 1) throw new ConfigError(`AGENT_CAPACITY must be at least 1, got ${capacity}`);
  // "fsn1,nbg1,hel1" = one agent serving three regions; "fsn1;nbg1,hel1" = two agents.
  const groups = envString(env, "LOCAL_AGENTS", "fsn1,nbg1,hel1")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean);
  // Without a DNS server to follow them, every agent's databases must be reached at 127.0.0.1 (the
  // `*.localhost` wildcard): one address, ports apart. With one, each agent is a simulated host.
  const ownHosts = envString(env, "DNS_PROVIDER", "none") === "rfc2136";
  const seen = new Map<string, number>();
  const uidRange = envString(env, "AGENT_TENANT_UID_RANGE", "200000-299999");
  const [uidLo, uidHi] = uidRange.split("-").map(Number) as [number, number];
  const uidSlice = Math.floor((uidHi - uidLo + 1) / Math.max(1, groups.length));
  if (!Number.isInteger(uidLo) || !Number.isInteger(uidHi) || uidSlice < 1) {
    throw new ConfigError(
      `AGENT_TENANT_UID_RANGE must be <first>-<last> with a uid for each of the ${groups.length} agents, got "${uidRange}"`,
    );
  }
  const ports: Record<ScaledService, number> = {
    gateway,
    identity: envInt(env, "IDENTITY_PORT", gateway + 1),
    databases: envInt(env, "DATABASES_PORT", gateway + 2),
    billing: envInt(env, "BILLING_PORT", gateway + 3),
  };
  const count = Number.isInteger(replicas) && replicas >= 1 ? replicas : 1;
  const instances = Object.fromEntries(
    SCALED_SERVICES.map((s, i) => [s, count === 1 ? [ports[s]] : Array.from({ length: count }, (_, k) => replicaBase + i * count + k)]),
  ) as Record<ScaledService, number[]>;
  return {
    dataDir: resolve(envString(env, "DBAAS_DATA_DIR", join(REPO_ROOT, ".dbaas"))),
    replicas,
    instances,
    ...ports,
    metadata: envInt(env, "METADATA_PG_PORT", 5499),
    capacity,
    agents: groups.map((regions, i) => {
      const first = instanceBase + (ownHosts ? 0 : i * capacity);
      const region = regions.split(",")[0]!.trim();
      const nth = (seen.get(region) ?? 0) + 1;
      seen.set(region, nth);
      return {
        id: nth === 1 ? `agent-${region}` : `agent-${region}-${nth}`,
        publicAddress: ownHosts ? `127.0.0.${i + 2}` : "127.0.0.1",
        regions,
        poolerPortOffset: ownHosts ? capacity : groups.length * capacity,
        port: agentBase + i,
        instancePorts: [first, first + capacity - 1] as [number, number],
        tenantUids: [uidLo + i * uidSlice, uidLo + (i + 1) * uidSlice - 1] as [number, number],
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
    ...(layout.replicas > 1
      ? SCALED_SERVICES.flatMap((s) =>
          layout.instances[s].map((port, k) => ({ name: `${instanceName(s, k + 1)} instance`, setting: "REPLICA_BASE_PORT", port })),
        )
      : []),
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
  if (!Number.isInteger(layout.replicas) || layout.replicas < 1 || layout.replicas > MAX_LOCAL_REPLICAS) {
    problems.push(`LOCAL_REPLICAS must be a whole number from 1 to ${MAX_LOCAL_REPLICAS}, got ${layout.replicas}`);
  }
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
    const [pFirst, pLast] = [first + a.poolerPortOffset, last + a.poolerPortOffset];
    if (pLast > 65535)
      problems.push(`pooler ports of ${a.id} (${pFirst}–${pLast}) leave 1–65535: lower INSTANCE_PORT_BASE or AGENT_CAPACITY`);
    for (const p of own) {
      if (p.port >= pFirst && p.port <= pLast) {
        problems.push(
          `${p.setting}=${p.port} (${p.name}) lies inside the pooler ports of ${a.id} (${pFirst}–${pLast}, the instance ports shifted by ${a.poolerPortOffset}): ` +
            `move ${p.setting} or INSTANCE_PORT_BASE so they do not overlap`,
        );
      }
    }
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
