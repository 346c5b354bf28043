/**
 * `npm start`: the whole product on one machine, every service its own
 * process on its own port — gateway, identity, databases, billing and the
 * provisioner agents — with metadata in an embedded PostgreSQL unless
 * DATABASE_URL is set. Ctrl-C stops every process and every PostgreSQL
 * instance; starting again brings the same databases back.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { startMetadataPostgres } from "./metadata-postgres.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const env = process.env;
const num = (name: string, fallback: number) => (env[name] ? Number(env[name]) : fallback);

const dataDir = resolve(env.DBAAS_DATA_DIR ?? join(root, ".dbaas"));
const gatewayPort = num("PORT", 8080);
const ports = {
  identity: num("IDENTITY_PORT", gatewayPort + 1),
  databases: num("DATABASES_PORT", gatewayPort + 2),
  billing: num("BILLING_PORT", gatewayPort + 3),
  agentBase: num("AGENT_BASE_PORT", gatewayPort + 10),
  instanceBase: num("INSTANCE_PORT_BASE", 15400),
  metadata: num("METADATA_PG_PORT", 5499),
};
// "fsn1,nbg1,hel1" = one agent serving three regions; "fsn1;nbg1,hel1" = two agents.
const agentRegions = (env.LOCAL_AGENTS ?? "fsn1,nbg1,hel1").split(";").map((s) => s.trim()).filter(Boolean);
const INSTANCES_PER_AGENT = num("AGENT_CAPACITY", 200);

const tty = process.stdout.isTTY;
const COLORS = ["36", "35", "33", "32", "34", "31"];
function printLine(name: string, color: string, line: string) {
  let text = line;
  try {
    const { time: _t, level, service: _s, msg, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const fields = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
    text = `${level === "info" ? "" : `${String(level).toUpperCase()} `}${msg} ${fields.join(" ")}`.trimEnd();
  } catch {
    // Not one of our JSON lines (e.g. a crash trace): print as it is.
  }
  const label = name.padEnd(10);
  process.stdout.write(`${tty ? `\x1b[${color}m${label}\x1b[0m` : label} | ${text}\n`);
}

interface Service {
  name: string;
  entry: string;
  env: Record<string, string>;
  health: () => Promise<boolean>;
  child?: ChildProcess;
  restarts: number;
}

let shuttingDown = false;
let stopAll: (reason: string, code?: number) => Promise<void> = async (_r, code = 1) => process.exit(code);

function launch(svc: Service, color: string) {
  const child = spawn(process.execPath, ["--import", "tsx", svc.entry], {
    cwd: root,
    env: { ...env, ...svc.env },
    stdio: ["ignore", "pipe", "pipe"],
    // Own process group: a terminal's Ctrl-C reaches only this runner, which then stops
    // each service exactly once and in an orderly way.
    detached: true,
  });
  svc.child = child;
  // For operators and crash tests: which process is which service right now.
  void mkdir(join(dataDir, "run"), { recursive: true }).then(() => writeFile(join(dataDir, "run", `${svc.name}.pid`), String(child.pid)));
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream }).on("line", (l) => printLine(svc.name, color, l));
  }
  child.on("exit", (code, signal) => {
    if (shuttingDown) return;
    // A crashed service is restarted, as a supervisor would: the system converges after any one crash.
    svc.restarts++;
    printLine(svc.name, color, `exited (${signal ?? code}); restarting`);
    setTimeout(() => !shuttingDown && launch(svc, color), Math.min(500 * svc.restarts, 5000));
  });
}

function h2Health(port: number): Promise<boolean> {
  return new Promise((resolveOk) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => resolveOk(false));
    const req = session.request({ ":path": "/healthz" });
    req.on("response", (h) => {
      resolveOk(h[":status"] === 200);
      req.resume();
      session.destroy();
    });
    req.on("error", () => resolveOk(false));
    req.end();
  });
}

function h1Health(port: number): Promise<boolean> {
  return new Promise((resolveOk) => {
    http
      .get({ host: "127.0.0.1", port, path: "/healthz" }, (res) => {
        res.resume();
        resolveOk(res.statusCode === 200);
      })
      .on("error", () => resolveOk(false));
  });
}

async function waitHealthy(svc: Service, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await svc.health()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${svc.name} did not become healthy within ${timeoutMs / 1000}s`);
}

/** Fails fast, naming the setting to change, when a port the stack needs is taken. */
async function assertPortsFree(wanted: Array<[string, number]>): Promise<void> {
  for (const [setting, port] of wanted) {
    const free = await new Promise<boolean>((done) => {
      const probe = net.createServer();
      probe.once("error", () => done(false));
      probe.listen(port, "127.0.0.1", () => probe.close(() => done(true)));
    });
    if (!free) throw new Error(`port ${port} is already in use (another stack running?); set ${setting} to use another`);
  }
}

async function internalSecret(): Promise<string> {
  if (env.INTERNAL_AUTH_SECRET) return env.INTERNAL_AUTH_SECRET;
  // Kept in the data dir so a service restarted on its own still talks to the others.
  const file = join(dataDir, "internal-auth-secret");
  try {
    return (await readFile(file, "utf8")).trim();
  } catch {
    const secret = randomBytes(32).toString("base64url");
    await writeFile(file, secret, { mode: 0o600 });
    return secret;
  }
}

async function main() {
  await assertPortsFree([
    ["PORT", gatewayPort],
    ["IDENTITY_PORT", ports.identity],
    ["DATABASES_PORT", ports.databases],
    ["BILLING_PORT", ports.billing],
    ...agentRegions.map((_, i): [string, number] => ["AGENT_BASE_PORT", ports.agentBase + i]),
    ...(env.DATABASE_URL ? [] : [["METADATA_PG_PORT", ports.metadata] as [string, number]]),
  ]);
  await mkdir(dataDir, { recursive: true });
  // PostgreSQL runs as an unprivileged user below this directory: it must be able to traverse it.
  await chmod(dataDir, 0o755);
  const secret = await internalSecret();
  const metadata = env.DATABASE_URL ? undefined : await startMetadataPostgres(dataDir, ports.metadata, env.AGENT_RUN_AS_USER ?? "nobody");
  const databaseUrl = env.DATABASE_URL ?? metadata!.url;
  const common = { INTERNAL_AUTH_SECRET: secret, DATABASE_URL: databaseUrl };
  const url = (port: number) => `http://127.0.0.1:${port}`;

  const services: Service[] = [
    {
      name: "identity",
      entry: "services/identity/src/main.ts",
      // Identity asks databases before deleting an organization, billing before a paid plan; its clients connect lazily.
      env: {
        ...common,
        PORT: String(ports.identity),
        DATABASES_URL: url(ports.databases),
        BILLING_URL: url(ports.billing),
        PUBLIC_BASE_URL: `http://127.0.0.1:${gatewayPort}`,
      },
      health: () => h2Health(ports.identity),
      restarts: 0,
    },
    {
      name: "billing",
      entry: "services/billing/src/main.ts",
      // Spending alerts are mailed through identity, which starts first.
      env: { ...common, PORT: String(ports.billing), IDENTITY_URL: url(ports.identity) },
      health: () => h2Health(ports.billing),
      restarts: 0,
    },
    {
      name: "databases",
      entry: "services/databases/src/main.ts",
      env: { ...common, PORT: String(ports.databases), BILLING_URL: url(ports.billing) },
      health: () => h2Health(ports.databases),
      restarts: 0,
    },
    ...agentRegions.map((regions, i): Service => {
      const agentId = `agent-${regions.split(",")[0]}`;
      const first = ports.instanceBase + i * INSTANCES_PER_AGENT;
      return {
        name: agentId,
        entry: "services/provisioner-agent/src/main.ts",
        env: {
          INTERNAL_AUTH_SECRET: secret,
          PORT: String(ports.agentBase + i),
          AGENT_ID: agentId,
          AGENT_REGIONS: regions,
          AGENT_PORT_RANGE: `${first}-${first + INSTANCES_PER_AGENT - 1}`,
          AGENT_DATA_DIR: join(dataDir, "agents", agentId),
          DATABASES_URL: url(ports.databases),
        },
        health: () => h2Health(ports.agentBase + i),
        restarts: 0,
      };
    }),
    {
      name: "gateway",
      entry: "gateway/src/main.ts",
      env: {
        INTERNAL_AUTH_SECRET: secret,
        PORT: String(gatewayPort),
        IDENTITY_URL: url(ports.identity),
        DATABASES_URL: url(ports.databases),
        BILLING_URL: url(ports.billing),
      },
      health: () => h1Health(gatewayPort),
      restarts: 0,
    },
  ];

  stopAll = async (reason: string, exitCode = 0) => {
    if (shuttingDown) return;
    shuttingDown = true;
    process.stdout.write(`\nstopping (${reason}): every service and every PostgreSQL instance…\n`);
    await Promise.all(
      services.map(
        (s) =>
          new Promise<void>((done) => {
            const c = s.child;
            if (!c || c.exitCode !== null || c.signalCode !== null) return done();
            const kill = setTimeout(() => c.kill("SIGKILL"), 20_000);
            c.once("exit", () => {
              clearTimeout(kill);
              done();
            });
            c.kill("SIGTERM");
          }),
      ),
    );
    await metadata?.stop();
    process.stdout.write("stopped.\n");
    process.exit(exitCode);
  };
  process.on("SIGINT", () => void stopAll("SIGINT"));
  process.on("SIGTERM", () => void stopAll("SIGTERM"));

  // Start in dependency order, each healthy before the next that calls it.
  for (const [i, svc] of services.entries()) {
    launch(svc, COLORS[i % COLORS.length]!);
    await waitHealthy(svc, 120_000);
  }
  const base = `http://127.0.0.1:${gatewayPort}`;
  process.stdout.write(
    `\ndbaas stack ready: ${base}\n` +
      `  sign up:  curl -s ${base}/v1/auth/signup -H 'content-type: application/json' \\\n` +
      `              -d '{"email":"you@example.com","password":"a-long-password","name":"You","organization_name":"Acme"}'\n` +
      `  log in:   curl -s ${base}/v1/auth/token -H 'content-type: application/json' -d '{"email":"you@example.com","password":"a-long-password"}'\n` +
      `  Ctrl-C stops everything; data stays in ${dataDir}\n\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`stack failed to start: ${(err as Error).message}\n`);
  void stopAll("start-up failed", 1);
});
