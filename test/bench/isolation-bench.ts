/**
 * `npm run bench:isolation`: what tenant isolation costs, measured against the shared-uid fallback in the same
 * run. Two agents' instance sides on this host, each in a process of its own (isolation-bench-agent.ts): one as
 * root — every server a uid of its own from AGENT_TENANT_UID_RANGE (the template copy `chown -R`'d to it) and a
 * cgroup with its tier's limits — and one as `nobody`, which cannot switch users: every server runs as the agent,
 * without cgroups (docs/product.md, "Tenant isolation on an agent host"). Both meter with nftables (the root one
 * with the system's nft, nobody's through a copy with the file capability cap_net_admin, as the container image
 * ships it), or both with the userspace proxy where that cannot be had, so the data path is the same.
 *
 * Measured, alternating which agent goes first: create → running of micro servers (the runtime's create + start,
 * ending when a TLS login through the published port reaches SCRAM, as the agent's own start does), each destroyed
 * after; then pgbench select-only (-S -M prepared, TLS) through each agent's published port to a small server
 * (2 vCPU: a quota of the whole machine here, so the limit itself does not bind). Prints the numbers and the ratios
 * isolated / shared and writes them to docs/benchmarks.md. Needs root, setpriv, pgbench and the user nobody.
 *
 * One tree, at the runtime: what the uid and the cgroup cost apart from everything else. Issue #20's "before and
 * after (same run, two trees)", the whole stack through the API, is BENCH_ISOLATION_BASELINE_REF=<commit> npm run
 * bench:isolation (isolation-trees-bench.ts).
 */
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { chmod, chown, copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { resolveRunAs } from "../../services/provisioner-agent/src/instances/run-as.ts";
import { nftTableName } from "../../services/provisioner-agent/src/proxy/nft-meter.ts";
import type { InstanceSettings } from "../../services/provisioner-agent/src/runtime.ts";
import { freePort, randomPassword, scramVerifier } from "../../services/provisioner-agent/test/instances/helpers.ts";
import { setWeight } from "./cgroup-weight.ts";
import { benchLog, fmt, runBench, summary, writeSection } from "./report.ts";

const CREATES = Number(process.env.BENCH_ISOLATION_CREATES ?? 10);
const ROUNDS = Number(process.env.BENCH_ISOLATION_ROUNDS ?? 6);
const SECONDS = Number(process.env.BENCH_ISOLATION_SECONDS ?? 10);
const CLIENTS = Number(process.env.BENCH_ISOLATION_CLIENTS ?? 8);
const SCALE = Number(process.env.BENCH_ISOLATION_SCALE ?? 10);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CHILD = fileURLToPath(new URL("./isolation-bench-agent.ts", import.meta.url));
const run = promisify(execFile);

type Mode = "isolated" | "shared";
const MODES: Mode[] = ["isolated", "shared"];

interface Hello {
  uid: number;
  isolation: string;
  resourceLimits: { enforced: boolean; how: string; reason?: string };
  meter: string[];
}

interface Agent {
  hello: Hello;
  dataDir: string;
  agentId: string;
  call<T = Record<string, unknown>>(req: Record<string, unknown>): Promise<T>;
  child: ChildProcess;
}

const which = (cmd: string) => {
  try {
    return execFileSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
};

/** The child agent, as `uid` (root, or nobody through setpriv); resolves once it has prepared (templates built). */
async function startAgent(uid: number, gid: number, dataDir: string, agentId: string, meter: string, nftPath: string): Promise<Agent> {
  const node = [process.execPath, "--import", "tsx", CHILD, dataDir, agentId, meter, nftPath];
  const child =
    uid === 0
      ? spawn(node[0]!, node.slice(1), { cwd: ROOT, stdio: ["pipe", "pipe", "inherit"] })
      : spawn("setpriv", [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", ...node], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent" },
          stdio: ["pipe", "pipe", "inherit"],
        });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`agent ${agentId} exited (${child.exitCode ?? child.signalCode})`);
    return JSON.parse(value) as Record<string, unknown>;
  };
  const hello = (await next()) as unknown as Hello;
  // One request at a time: answers come in order.
  let turn: Promise<unknown> = Promise.resolve();
  const call = <T>(req: Record<string, unknown>): Promise<T> => {
    const p = turn.then(async () => {
      child.stdin!.write(`${JSON.stringify(req)}\n`);
      const a = await next();
      if (!a.ok) throw new Error(`agent ${agentId}: ${req.op}: ${a.error}`);
      return a as T;
    });
    turn = p.catch(() => {});
    return p;
  };
  return { hello, dataDir, agentId, call, child };
}

async function pgbench(args: string[], port: number, password: string): Promise<string> {
  const { stdout } = await run("pgbench", ["-h", "127.0.0.1", "-p", String(port), "-U", "dbadmin", ...args, "defaultdb"], {
    env: { ...process.env, PGPASSWORD: password, PGSSLMODE: "require" },
    maxBuffer: 1 << 24,
  });
  return stdout;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new Error("run as root: the isolated agent gives each server a uid of its own, the other runs as nobody");
  for (const cmd of ["setpriv", "pgbench"]) if (!which(cmd)) throw new Error(`no ${cmd} (apt-get install util-linux postgresql-contrib)`);
  const nobody = resolveRunAs("nobody");
  const base = await mkdtemp(join(tmpdir(), "dbaas-bench-iso-"));
  await chmod(base, 0o755);
  const dirs: Record<Mode, string> = { isolated: join(base, "isolated"), shared: join(base, "shared") };
  await mkdir(dirs.isolated, { mode: 0o711 });
  await mkdir(dirs.shared, { mode: 0o700 });
  await chown(dirs.shared, nobody.uid, nobody.gid);

  // The same meter for both: nftables (nobody's through a copy of nft with cap_net_admin), else the proxy.
  let meter = "nftables";
  let meterNote = "";
  const capNft = join(base, "nft");
  const nft = which("nft");
  try {
    if (!nft || !which("setcap")) throw new Error("no nft or setcap");
    await copyFile(nft, capNft);
    await chmod(capNft, 0o755);
    execFileSync("setcap", ["cap_net_admin+ep", capNft]);
  } catch (e) {
    meter = "proxy";
    meterNote = ` (nftables could not be given to nobody: ${(e as Error).message})`;
  }
  const agents: Partial<Record<Mode, Agent>> = {};
  try {
    benchLog("starting the two agents (each builds its template)");
    const started = await Promise.all([
      startAgent(0, 0, dirs.isolated, "bench-iso-isolated", meter, nft ?? "nft"),
      startAgent(nobody.uid, nobody.gid, dirs.shared, "bench-iso-shared", meter, meter === "nftables" ? capNft : "nft"),
    ]);
    agents.isolated = started[0];
    agents.shared = started[1];
    for (const mode of MODES) benchLog(`${mode}: ${JSON.stringify(agents[mode]!.hello)}`);
    if (agents.isolated.hello.isolation !== "per-tenant-uid" || agents.shared.hello.isolation !== "shared-uid") {
      throw new Error("the agents did not get the isolation modes to compare");
    }

    // Create → running, alternating which goes first.
    const creates: Record<Mode, number[]> = { isolated: [], shared: [] };
    for (let i = 0; i < CREATES; i++) {
      for (const mode of i % 2 ? [...MODES].reverse() : MODES) {
        const id = `bench-${mode}-${i}`;
        const settings: InstanceSettings = {
          port: await freePort(),
          tier: "micro",
          hostname: `${id}.example.test`,
          scramVerifier: scramVerifier(randomPassword()),
        };
        const { ms } = await agents[mode]!.call<{ ms: number }>({ op: "create", id, settings });
        creates[mode].push(ms);
        await agents[mode]!.call({ op: "destroy", id });
      }
      benchLog(`create → running ${i + 1}/${CREATES}: isolated ${fmt(creates.isolated[i]!)} ms, shared ${fmt(creates.shared[i]!)} ms`);
    }

    // pgbench through each agent's published port.
    const password = randomPassword();
    const ports = {} as Record<Mode, number>;
    for (const mode of MODES) {
      ports[mode] = await freePort();
      const settings: InstanceSettings = {
        port: ports[mode],
        tier: "small",
        hostname: `bench-${mode}.example.test`,
        scramVerifier: scramVerifier(password),
      };
      await agents[mode]!.call({ op: "create", id: `pgb-${mode}`, settings });
      await pgbench(["-i", "-q", "-s", String(SCALE)], ports[mode], password);
    }
    const rounds = async (what: string): Promise<Record<Mode, number[]>> => {
      const tps: Record<Mode, number[]> = { isolated: [], shared: [] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const mode of r % 2 ? [...MODES].reverse() : MODES) {
          const out = await pgbench(
            ["-S", "-M", "prepared", "-n", "-c", String(CLIENTS), "-j", "2", "-T", String(SECONDS)],
            ports[mode],
            password,
          );
          const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
          if (!m) throw new Error(`no tps in pgbench output:\n${out}`);
          tps[mode].push(Number(m[1]));
        }
        benchLog(`pgbench (${what}) round ${r + 1}/${ROUNDS}: isolated ${fmt(tps.isolated[r]!)} tps, shared ${fmt(tps.shared[r]!)} tps`);
      }
      return tps;
    };
    const tps = await rounds("default weight");
    // The same again with the isolated server's cgroup (and the agent's parent above it) weighing what its busy
    // backends weigh as processes of the agent's cgroup, where the shared server's run: one CPU weight each.
    const weight = await setWeight(join(dirs.isolated, "instances", "pgb-isolated"), CLIENTS);
    const tpsEqual = await rounds(`weight ${weight}`);
    const limits = (await agents.isolated.call<{ stats: Record<string, number> | null }>({ op: "limits", id: "pgb-isolated" })).stats;
    const sharedLimits = (await agents.shared.call<{ stats: Record<string, number> | null }>({ op: "limits", id: "pgb-shared" })).stats;
    const load = loadavg()[0]!.toFixed(1);

    const c = { isolated: summary(creates.isolated), shared: summary(creates.shared) };
    const createRatio = c.isolated.p50 / c.shared.p50;
    const tpsRow = (label: string, t: Record<Mode, number[]>) =>
      `| ${label} | ${fmt(mean(t.isolated))} (${t.isolated.map(fmt).join(", ")}) | ${fmt(mean(t.shared))} (${t.shared.map(fmt).join(", ")}) | ` +
      `**${(mean(t.isolated) / mean(t.shared)).toFixed(3)}** (median of the rounds' own ratios ${median(t.isolated.map((x, i) => x / t.shared[i]!)).toFixed(3)}) |`;
    const body = [
      `Command: \`npm run bench:isolation\` (test/bench/isolation-bench.ts; BENCH_ISOLATION_CREATES=${CREATES}, ` +
        `BENCH_ISOLATION_ROUNDS=${ROUNDS}, BENCH_ISOLATION_SECONDS=${SECONDS}). Machine: ${cpus().length} cores, ` +
        `${Math.round(totalmem() / 1024 ** 3)} GiB, shared with other engineers' tests (1-minute load average ${load} at the end): ` +
        "compare the ratios. Two agents' instance sides on this host in one run: **isolated** (as root: each server a uid " +
        "of its own from AGENT_TENANT_UID_RANGE, its template copy chown -R'd to it, and a cgroup v1/v2 with its tier's " +
        "CPU, memory and pids limits) and **shared** (as nobody, the shared-uid fallback: every server as the agent, no " +
        `cgroup: ${agents.shared.hello.resourceLimits.reason ?? "none"}). Both meter with ${meter}${meterNote}. ` +
        "Alternating which goes first. One tree, both modes of the same code, timed at the runtime (not through the " +
        'API): not issue #20\'s "two trees", which the section "Tenant isolation, two trees" measures ' +
        "(BENCH_ISOLATION_BASELINE_REF); this one separates the uid and the cgroup from everything else the trees differ in.",
      "",
      "| measurement | isolated | shared | isolated / shared |",
      "|---|---|---|---|",
      `| create → running, micro (runtime create + start to a TLS login reaching SCRAM through the published port), p50 ms ` +
        `(${CREATES} each) | ${fmt(c.isolated.p50)} (min ${fmt(c.isolated.min)}, max ${fmt(c.isolated.max)}) | ` +
        `${fmt(c.shared.p50)} (min ${fmt(c.shared.min)}, max ${fmt(c.shared.max)}) | **${createRatio.toFixed(3)}** |`,
      tpsRow(
        `pgbench select-only TPS, small (2 vCPU), ${CLIENTS} clients, TLS, scale ${SCALE}, mean of ${ROUNDS} rounds of ${SECONDS} s: ` +
          "the server's cgroup at its default CPU weight",
        tps,
      ),
      tpsRow(`the same, the isolated server's cgroup and its parent at ${weight} (${CLIENTS} processes' worth)`, tpsEqual),
      "",
      `The isolated pgbench server's cgroup after the run: ${limits ? JSON.stringify(limits) : "none"}; the shared one's: ` +
        `${sharedLimits ? JSON.stringify(sharedLimits) : "none"}.`,
      "",
      "Why two pgbench rows: a server's cgroup is one scheduling entity of the default CPU weight (v1 cpu.shares 1024, " +
        "v2 cpu.weight 100) however many of its backends are busy, while each process of the cgroup the shared-uid " +
        "servers run in weighs that much on its own. On this machine that cgroup is the root one, with every other " +
        "engineer's test processes in it, so under load the isolated server gets a smaller share of the CPU than " +
        "eight busy backends of the shared one: the first row measures that, not isolation's own work. The second row " +
        "gives the isolated cgroup (and the agent's parent) the weight of as many processes as pgbench has clients; what " +
        "is left between the two columns is the per-tenant uid and the cgroup's accounting. On an agent host the " +
        "competitors are other tenants' servers, each in a cgroup of its own, so the first row's effect is the " +
        "fairness between tenants the cgroups are for (a server's share does not grow with its backends).",
    ].join("\n");
    process.stdout.write(`\n${body}\n`);
    await writeSection("Tenant isolation: per-tenant uid + cgroup vs the shared-uid fallback (npm run bench:isolation)", body);
  } finally {
    for (const mode of MODES) {
      const a = agents[mode];
      if (!a) continue;
      await Promise.race([a.call({ op: "close" }).catch(() => {}), new Promise((r) => setTimeout(r, 60_000))]);
      a.child.kill("SIGKILL");
      try {
        execFileSync("nft", ["delete", "table", "ip", nftTableName(a.dataDir, a.agentId)], { stdio: "ignore" });
      } catch {
        // never made, or gone with its agent
      }
    }
    await rm(base, { recursive: true, force: true });
  }
}

// With BENCH_ISOLATION_BASELINE_REF: the two-tree comparison (isolation-trees-bench.ts) instead.
runBench(process.env.BENCH_ISOLATION_BASELINE_REF ? () => import("./isolation-trees-bench.ts").then((m) => m.treesMain()) : main);
