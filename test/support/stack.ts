import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** True when nothing listens on `port` (127.0.0.1). */
function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = net.createServer();
    s.once("error", () => done(false));
    s.listen(port, "127.0.0.1", () => s.close(() => done(true)));
  });
}

/**
 * The first port of the kernel's range for outgoing connections (32768 on Linux by default): a port
 * below it is never taken by a client socket between our check that it is free and the stack's listen.
 */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 20000 + 4000 ? first : 60000;
  } catch {
    return 60000;
  }
}

/**
 * A block of `count` consecutive free ports, chosen at random from 20000 up to the kernel's ephemeral
 * range, none of them in `avoid` ([first, last] blocks).
 */
export async function freePortBlock(count: number, avoid: Array<[number, number]> = []): Promise<number> {
  const end = ephemeralStart();
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20000 + Math.floor(Math.random() * (end - 20000 - count));
    if (avoid.some(([first, last]) => base <= last && base + count - 1 >= first)) continue;
    const checks = await Promise.all(Array.from({ length: count }, (_, i) => portFree(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new Error("no block of free ports found");
}

export interface StackOptions {
  /** Metadata database; unset means the embedded PostgreSQL, as `npm start` on a fresh machine. */
  databaseUrl?: string;
  /** LOCAL_AGENTS, e.g. "fsn1;nbg1,hel1" for two agents. */
  agents?: string;
  dataDir?: string;
  env?: Record<string, string>;
  /** The checkout whose `deploy/local/stack.ts` runs (its own node_modules); default: this one. */
  root?: string;
  /** How long the runner may take to say it is ready (default 120 s; each agent builds its templates first). */
  readyTimeoutMs?: number;
}

export interface Stack {
  baseUrl: string;
  dataDir: string;
  env: Record<string, string>;
  /** The checkout the runner was started from. */
  root: string;
  output(): string;
  /** PID of a service process of the stack (e.g. "agent-fsn1", "databases"). */
  pid(service: string): Promise<number>;
  /** The runner's own pid (deploy/local/stack.ts). */
  runnerPid: number;
  /** Resolves with the runner's exit code (null when killed by a signal) once it exited. */
  exited: Promise<number | null>;
  /** Ctrl-C equivalent: resolves when the runner exited. */
  stop(): Promise<number | null>;
  /** Stops and removes the stack's data directory (instances included). */
  destroy(): Promise<void>;
}

/**
 * Starts `deploy/local/stack.ts` (what `npm start` runs) on free ports and
 * resolves when it printed that it is ready.
 */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), "dbaas-e2e-")));
  // LOCAL_REPLICAS=n: the instances of the four scaled services listen from PORT + 20 (REPLICA_BASE_PORT's default).
  const replicas = Number(opts.env?.LOCAL_REPLICAS ?? 1);
  const span = replicas > 1 ? 20 + 4 * replicas : 16;
  const services = await freePortBlock(span);
  const agentCount = (opts.agents ?? "fsn1,nbg1,hel1").split(";").length;
  const capacity = Number(opts.env?.AGENT_CAPACITY ?? 30);
  // Not overlapping the services' block: nothing listens there yet, so both could look free. Twice the instances:
  // the poolers' ports follow theirs (AGENT_POOLER_PORT_OFFSET, services/kit local-stack.ts).
  const instances = await freePortBlock(2 * agentCount * capacity, [[services, services + span - 1]]);
  const env: Record<string, string> = {
    PORT: String(services),
    INSTANCE_PORT_BASE: String(instances),
    AGENT_CAPACITY: "30",
    METADATA_PG_PORT: String(services + 15),
    DBAAS_DATA_DIR: dataDir,
    // The agents' shared backup store (what the runner defaults to), named here so tests can look into it.
    BACKUP_STORE_URL: pathToFileURL(join(dataDir, "backups")).href,
    LOCAL_AGENTS: opts.agents ?? "fsn1,nbg1,hel1",
    AGENT_REPORT_INTERVAL_MS: "1000",
    // Stacks of different test files must not share rate-limit or idempotency keys in Redis.
    REDIS_KEY_PREFIX: `e2e-${services}:`,
    LOG_LEVEL: process.env.E2E_LOG_LEVEL ?? "info",
    ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
    ...opts.env,
  };
  return await launchStack(env, dataDir, opts.root ?? root, opts.readyTimeoutMs);
}

/** Starts the runner again with the environment of an earlier stack (same ports, data, metadata). */
export function restartStack(previous: Stack): Promise<Stack> {
  return launchStack(previous.env, previous.dataDir, previous.root);
}

async function launchStack(env: Record<string, string>, dataDir: string, cwd: string, readyTimeoutMs = 120_000): Promise<Stack> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "deploy/local/stack.ts"], {
    cwd,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  // Output keeps arriving after start-up (restarts, stale-run notes): tests read it through output().
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`stack not ready after ${readyTimeoutMs / 1000} s:\n${output.slice(-4000)}`)),
      readyTimeoutMs,
    );
    const onData = () => {
      if (output.includes("dbaas stack ready:")) {
        clearTimeout(timer);
        ready();
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    void exited.then((code) => {
      clearTimeout(timer);
      fail(new Error(`stack exited (${code}) before ready:\n${output.slice(-4000)}`));
    });
  });
  const stack: Stack = {
    baseUrl: `http://127.0.0.1:${env.PORT}`,
    async pid(service: string) {
      return Number((await readFile(join(dataDir, "run", `${service}.pid`), "utf8")).trim());
    },
    dataDir,
    env,
    root: cwd,
    runnerPid: child.pid!,
    exited,
    output: () => output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGINT");
      return await exited;
    },
    async destroy() {
      await stack.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}
