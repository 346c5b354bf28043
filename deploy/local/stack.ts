/**
 * `npm start`: the whole product on one machine, every service its own
 * process on its own port — the metadata PostgreSQL (embedded unless
 * DATABASE_URL is set), identity, billing, databases, the provisioner agents
 * and the gateway. Every child is restarted when it dies and stops when this
 * runner dies (supervisor.ts, child-guard.ts). Ctrl-C (or `npm run stop`)
 * stops every process and every PostgreSQL instance and PgBouncer (those of an
 * agent that was killed too: run-state.ts); starting again brings the
 * same databases back, after stopping whatever a killed earlier run left.
 * LOCAL_REPLICAS=2 (with REDIS_URL) runs two instances of each of gateway,
 * identity, databases and billing, each on its own port, behind a balancer
 * on the service's port (balancer.ts).
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { instanceName, layoutProblems, localStackLayout, localUrl, SCALED_SERVICES, type ScaledService, stackPorts } from "@dbaas/kit";
import { type Balancer, startBalancer } from "./balancer.ts";
import { metadataHealthy, metadataPassword, metadataUrl } from "./metadata-postgres.ts";
import { portFree, portOwner } from "./port-owner.ts";
import { clearRunFiles, liveRunner, stopLeftovers, stopServersAndPoolers, writeRunnerPid } from "./run-state.ts";
import { bundleServices } from "./bundle.ts";
import { createSupervisor, h1Health, h2Health, waitHealthy, type Service, type Supervisor } from "./supervisor.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const env = process.env;
const say = (line: string) => process.stdout.write(`${line}\n`);

/** Fails fast, naming the setting to change and, when /proc tells, the process in the way. */
async function assertPortsFree(wanted: Array<{ name: string; setting: string; port: number }>): Promise<void> {
  for (const p of wanted) {
    if (await portFree(p.port)) continue;
    const owner = portOwner(p.port);
    throw new Error(
      `port ${p.port} (${p.name}) is already in use${owner ? ` by ${owner}` : ""}; ` +
        `stop that program or set ${p.setting} to a free port`,
    );
  }
}

/**
 * INTERNAL_AUTH_SECRET, AGENT_REPLICATION_SECRET (shared by the stack's agents: a replica's agent derives its
 * primary's replication password from it) or BACKUP_ENCRYPTION_KEY (the master key of every agent's backups, base64).
 */
async function internalSecret(
  dataDir: string,
  name = "INTERNAL_AUTH_SECRET",
  fileName = "internal-auth-secret",
  encoding: BufferEncoding = "base64url",
): Promise<string> {
  if (env[name]) return env[name];
  // Kept in the data dir so a service restarted on its own still talks to the others (and old backups still open).
  const file = join(dataDir, fileName);
  try {
    return (await readFile(file, "utf8")).trim();
  } catch {
    const secret = randomBytes(32).toString(encoding);
    await writeFile(file, secret, { mode: 0o600, flag: "wx" });
    return secret;
  }
}

const layout = localStackLayout(env);
const dataDir = layout.dataDir;
const embeddedMetadata = !env.DATABASE_URL;
let supervisor: Supervisor | undefined;
let stopGroups: Service[][] = [];
/** With LOCAL_REPLICAS ≥ 2, the balancer on each scaled service's port (balancer.ts). */
const balancers: Balancer[] = [];
let stopping = false;
/** Set once this runner wrote its pid file: only then are the run's files its to remove. */
let ownsRun = false;

async function stopAll(reason: string, exitCode = 0): Promise<void> {
  if (stopping) return;
  stopping = true;
  say(`\nstopping (${reason}): every service and every PostgreSQL instance…`);
  // The metadata PostgreSQL last: the others write to it on their way out.
  await supervisor?.stop(stopGroups);
  await Promise.all(balancers.map((b) => b.close()));
  // What no agent stopped: a killed one's (a lost host simulated, or one SIGKILLed after the grace), or one stopped
  // while it was still starting. Nothing of this run may outlive it — a PgBouncer never stops on its own.
  if (ownsRun) await stopServersAndPoolers(dataDir, (line) => say(`left running: ${line}`)).catch((e) => say(`left running: ${e}`));
  if (ownsRun) await clearRunFiles(dataDir);
  say("stopped.");
  process.exit(exitCode);
}

async function main() {
  const problems = layoutProblems(layout, embeddedMetadata);
  if (problems.length > 0) throw new Error(`these settings cannot run:\n  - ${problems.join("\n  - ")}`);
  if (layout.replicas > 1 && !env.REDIS_URL) {
    // Without it each gateway would keep its own idempotency keys and rate limits: a POST retried through the
    // other gateway would run twice, and every limit would double.
    throw new Error(`LOCAL_REPLICAS=${layout.replicas} needs REDIS_URL: the gateways share idempotency keys and rate limits there`);
  }
  await mkdir(dataDir, { recursive: true });
  // PostgreSQL runs as an unprivileged user below this directory: it must be able to traverse it.
  await chmod(dataDir, 0o755);
  const other = liveRunner(dataDir, root);
  if (other !== undefined) {
    throw new Error(
      `a stack is already running from ${dataDir} (runner pid ${other}): stop it with \`npm run stop\`, ` +
        "or give a second stack its own DBAAS_DATA_DIR and PORT",
    );
  }
  const stale = await stopLeftovers(dataDir, root, (line) => say(`earlier run: ${line}`));
  if (stale.services.length + stale.postmasters.length > 0) say("earlier run: stopped what it left running");
  await writeRunnerPid(dataDir);
  ownsRun = true;
  // Every service runs from a bundle of this checkout (bundle.ts): restarts take a quarter of tsx's time.
  const builtAt = Date.now();
  const { paths: bundles, reused } = await bundleServices(root, {
    "child-guard": "deploy/local/child-guard.ts",
    metadata: "deploy/local/metadata-main.ts",
    identity: "services/identity/src/main.ts",
    billing: "services/billing/src/main.ts",
    databases: "services/databases/src/main.ts",
    agent: "services/provisioner-agent/src/main.ts",
    "agent-watchdog": "services/provisioner-agent/src/instances/watchdog-main.ts",
    gateway: "gateway/src/main.ts",
  });
  say(
    reused
      ? `services' bundles unchanged since they were built (${Date.now() - builtAt} ms)`
      : `services bundled in ${Date.now() - builtAt} ms`,
  );
  supervisor = createSupervisor(root, dataDir, bundles["child-guard"]!);
  await assertPortsFree(stackPorts(layout, embeddedMetadata));

  const secret = await internalSecret(dataDir);
  const replicationSecret = await internalSecret(dataDir, "AGENT_REPLICATION_SECRET", "agent-replication-secret");
  const backupKey = await internalSecret(dataDir, "BACKUP_ENCRYPTION_KEY", "backup-encryption-key", "base64");
  // The embedded metadata server takes only its password (deploy/local/metadata-postgres.ts).
  const metadataSecret = embeddedMetadata ? await metadataPassword(dataDir) : "";
  const databaseUrl = env.DATABASE_URL ?? metadataUrl(layout.metadata, metadataSecret);
  const common = { INTERNAL_AUTH_SECRET: secret, DATABASE_URL: databaseUrl };
  const url = localUrl;
  const svc = (name: string, entry: string, svcEnv: Record<string, string>, health: () => Promise<boolean>): Service => ({
    name,
    entry,
    env: svcEnv,
    health,
    restarts: 0,
  });

  const metadata = embeddedMetadata
    ? [
        svc("metadata", bundles.metadata!, { DBAAS_DATA_DIR: dataDir, METADATA_PG_PORT: String(layout.metadata) }, () =>
          metadataHealthy(layout.metadata, metadataSecret),
        ),
      ]
    : [];
  /** One Service per instance of a scaled service (LOCAL_REPLICAS), each on its own port; `health` checks that instance. */
  const instances = (
    service: ScaledService,
    bundle: string,
    svcEnv: Record<string, string>,
    health: (port: number) => () => Promise<boolean>,
  ): Service[] =>
    layout.instances[service].map((port, k) => svc(instanceName(service, k + 1), bundle, { ...svcEnv, PORT: String(port) }, health(port)));
  const h2 = (port: number) => () => h2Health(port);
  const h1 = (port: number) => () => h1Health(port);
  // Every instance reaches the others through their service's port: the instance itself, or the balancer in front of several.
  const identity = instances(
    "identity",
    bundles.identity!,
    // Identity asks databases before deleting an organization, billing before a paid plan; its clients connect lazily.
    { ...common, DATABASES_URL: url(layout.databases), BILLING_URL: url(layout.billing), PUBLIC_BASE_URL: url(layout.gateway) },
    h2,
  );
  // Spending alerts are mailed through identity, which starts first.
  const billing = instances("billing", bundles.billing!, { ...common, IDENTITY_URL: url(layout.identity) }, h2);
  // Storage full and back are mailed through identity (its client connects on first use).
  const databases = instances(
    "databases",
    bundles.databases!,
    { ...common, BILLING_URL: url(layout.billing), IDENTITY_URL: url(layout.identity) },
    h2,
  );
  const backends = [...identity, ...billing, ...databases];
  const agents = layout.agents.map((a) =>
    svc(
      a.id,
      bundles.agent!,
      {
        INTERNAL_AUTH_SECRET: secret,
        AGENT_REPLICATION_SECRET: replicationSecret,
        BACKUP_ENCRYPTION_KEY: backupKey,
        // A rotation under way (services/provisioner-agent/README.md): the keys being rotated away from.
        ...(env.BACKUP_ENCRYPTION_KEY_PREVIOUS ? { BACKUP_ENCRYPTION_KEY_PREVIOUS: env.BACKUP_ENCRYPTION_KEY_PREVIOUS } : {}),
        PORT: String(a.port),
        AGENT_ID: a.id,
        AGENT_REGIONS: a.regions,
        AGENT_PUBLIC_ADDRESS: a.publicAddress,
        // Its calls to the control plane come from its own address, as a real host's would (a partition is a rule on it).
        AGENT_CONTROL_SOURCE_ADDRESS: a.publicAddress,
        AGENT_PORT_RANGE: `${a.instancePorts[0]}-${a.instancePorts[1]}`,
        AGENT_TENANT_UID_RANGE: `${a.tenantUids[0]}-${a.tenantUids[1]}`,
        AGENT_POOLER_PORT_OFFSET: String(a.poolerPortOffset),
        AGENT_DATA_DIR: join(dataDir, "agents", a.id),
        // Its fencing watchdog (started detached by the agent) from the bundle too: Node cannot run TypeScript.
        AGENT_WATCHDOG_ENTRY: bundles["agent-watchdog"]!,
        // One store shared by every agent, so a restore can run on any of them (an s3:// URL given to the runner wins).
        BACKUP_STORE_URL: process.env.BACKUP_STORE_URL || pathToFileURL(join(dataDir, "backups")).href,
        DATABASES_URL: url(layout.databases),
      },
      () => h2Health(a.port),
    ),
  );
  const gateways = instances(
    "gateway",
    bundles.gateway!,
    {
      INTERNAL_AUTH_SECRET: secret,
      IDENTITY_URL: url(layout.identity),
      DATABASES_URL: url(layout.databases),
      BILLING_URL: url(layout.billing),
      // The maintenance switch of a stack without Redis (`npm run maintenance`).
      MAINTENANCE_FILE: join(dataDir, "maintenance.json"),
    },
    h1,
  );
  stopGroups = [[...gateways, ...agents, ...backends], metadata];

  if (layout.replicas > 1) {
    // Up before any instance: a connection that finds no instance listening yet is refused, as without the balancer.
    for (const service of SCALED_SERVICES) {
      balancers.push(await startBalancer(layout[service], layout.instances[service]));
    }
    say(
      `${layout.replicas} instances of each of ${SCALED_SERVICES.join(", ")}, behind a balancer on each one's port: ` +
        SCALED_SERVICES.map((s) => `${s} ${layout.instances[s].join(",")}`).join("; "),
    );
  }
  // Start in dependency order, each healthy before the next that calls it.
  for (const s of [...metadata, ...backends, ...agents, ...gateways]) {
    if (stopping) return;
    supervisor.launch(s);
    await waitHealthy(s, 120_000);
  }
  const base = url(layout.gateway);
  say(
    `\ndbaas stack ready: ${base}\n` +
      `  sign up:  curl -s ${base}/v1/auth/signup -H 'content-type: application/json' \\\n` +
      `              -d '{"email":"you@example.com","password":"a-long-password","name":"You","organization_name":"Acme"}'\n` +
      `  log in:   curl -s ${base}/v1/auth/token -H 'content-type: application/json' -d '{"email":"you@example.com","password":"a-long-password"}'\n` +
      `  Ctrl-C (or npm run stop) stops everything; data stays in ${dataDir}\n`,
  );
}

process.on("SIGINT", () => void stopAll("SIGINT"));
process.on("SIGTERM", () => void stopAll("SIGTERM"));
// The terminal went away: nobody is left to press Ctrl-C.
process.on("SIGHUP", () => void stopAll("SIGHUP"));
// Under `npm start` (which execs this runner) the stack lives as long as npm: killing npm, even with
// SIGKILL, stops it. Run directly (node … stack.ts), the runner outlives its shell as any program would.
if (process.env.npm_lifecycle_event === "start") {
  const parent = process.ppid;
  setInterval(() => process.ppid !== parent && void stopAll("npm exited"), 1_000).unref();
}

main().catch((err) => {
  process.stderr.write(`stack failed to start: ${(err as Error).message}\n`);
  void stopAll("start-up failed", 1);
});
