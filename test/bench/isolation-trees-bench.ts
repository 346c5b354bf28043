/**
 * `BENCH_ISOLATION_BASELINE_REF=<commit> npm run bench:isolation`: tenant isolation's cost as issue #20 asks for it,
 * "before and after (same run, two trees)". Two whole local stacks as `npm start` runs them (deploy/local/stack.ts,
 * one agent each, the embedded metadata PostgreSQL), up at the same time: this tree's, and the baseline commit's from
 * a git worktree with its own `npm install` (baseline-tree.ts). Run as root, this tree's agent gives every server a
 * uid of its own (AGENT_TENANT_UID_RANGE) and a cgroup with its tier's limits; the baseline's runs every server as
 * `nobody`, in the agent's own cgroup.
 *
 * Measured on both, alternating which tree goes first: create → running of micro databases through the public API
 * (POST /v1/databases until GET shows `running`, polled every 20 ms; each deleted after), then pgbench select-only
 * (-S -M prepared, TLS) through each database's published port to one database of BENCH_ISOLATION_TIER per tree, the
 * same scale, clients and round length. Prints per-round numbers and the ratios this tree / baseline, with the
 * 1-minute load average at the start, in each round and at the end, and writes its own section of docs/benchmarks.md.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { type Api, waitRunning } from "../support/backups.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { account } from "../support/replicas.ts";
import { setWeight } from "./cgroup-weight.ts";
import { withBaselineTree } from "./baseline-tree.ts";
import { benchLog as log, fmt, summary, writeSection } from "./report.ts";

const BASELINE_REF = process.env.BENCH_ISOLATION_BASELINE_REF ?? "";
const CREATES = Number(process.env.BENCH_ISOLATION_CREATES ?? 10);
const ROUNDS = Number(process.env.BENCH_ISOLATION_ROUNDS ?? 10);
const SECONDS = Number(process.env.BENCH_ISOLATION_SECONDS ?? 10);
const CLIENTS = Number(process.env.BENCH_ISOLATION_CLIENTS ?? 8);
const SCALE = Number(process.env.BENCH_ISOLATION_SCALE ?? 10);
const TIER = process.env.BENCH_ISOLATION_TIER ?? "small";
/** BENCH_ISOLATION_EQUAL_WEIGHT=0 leaves out the second pgbench series (head's cgroup at the weight of CLIENTS processes). */
const EQUAL_WEIGHT = process.env.BENCH_ISOLATION_EQUAL_WEIGHT !== "0";
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg()[0]!;

type Tree = "baseline" | "head";
const TREES: Tree[] = ["baseline", "head"];

interface Side {
  stack: Stack;
  api: Api;
}

/** create → running as the API shows it (polled every 20 ms); the database is deleted after, and its deletion waited for. */
async function createOne(api: Api, name: string): Promise<number> {
  const t0 = performance.now();
  const res = await api.post("/v1/databases", { name, region: "fsn1", tier: "micro" });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  const id = res.body.data.id as string;
  for (;;) {
    const got = await api.get(`/v1/databases/${id}`);
    if (got.body.data?.status === "running") break;
    if (got.status !== 200 || got.body.data?.status === "failed") throw new Error(`unexpected: ${JSON.stringify(got.body)}`);
    if (performance.now() - t0 > 120_000) throw new Error(`${id} not running after 120 s`);
    await sleep(20);
  }
  const ms = performance.now() - t0;
  const del = await api.delete(`/v1/databases/${id}`);
  if (del.status >= 300) throw new Error(`delete failed: ${del.status} ${JSON.stringify(del.body)}`);
  // Not timed: the next create should not meet this one's stop.
  const d0 = performance.now();
  while (performance.now() - d0 < 120_000) {
    const got = await api.get(`/v1/databases/${id}`);
    if (got.status === 404 || got.body.data?.status === "deleted") break;
    await sleep(200);
  }
  return ms;
}

/** The data directory of database `id` under the stack's agent. */
async function instanceDir(stack: Stack, id: string): Promise<string> {
  for (const agent of await readdir(join(stack.dataDir, "agents"))) {
    const dir = join(stack.dataDir, "agents", agent, "instances", id);
    if (existsSync(dir)) return dir;
  }
  throw new Error(`no instance directory for ${id}`);
}

/** Who the server of `id` runs as, and its CPU cgroup (v1 or v2) with what limits it there. */
async function serverIdentity(stack: Stack, id: string): Promise<string> {
  const pid = Number((await readFile(join(await instanceDir(stack, id), "postmaster.pid"), "utf8")).split("\n")[0]);
  const uid = /^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, "utf8"))?.[1];
  const lines = (await readFile(`/proc/${pid}/cgroup`, "utf8")).split("\n");
  const v1 = lines.find((l) => /^\d+:([^:]*,)?cpu(,[^:]*)?:/.test(l));
  const read = async (file: string) => (await readFile(file, "utf8").catch(() => "?")).trim();
  if (v1) {
    const path = v1.split(":")[2]!;
    const dir = join("/sys/fs/cgroup/cpu", path);
    const parent = path === "/" ? "" : `, its parent cpu.shares ${await read(join(dirname(dir), "cpu.shares"))}`;
    return `uid ${uid}, cpu cgroup ${path} (cpu.shares ${await read(join(dir, "cpu.shares"))}, cfs quota ${await read(join(dir, "cpu.cfs_quota_us"))} µs per ${await read(join(dir, "cpu.cfs_period_us"))} µs${parent})`;
  }
  const path = lines.find((l) => l.startsWith("0::"))!.slice(3);
  const dir = join("/sys/fs/cgroup", path);
  return `uid ${uid}, cgroup ${path} (cpu.weight ${await read(join(dir, "cpu.weight"))}, cpu.max ${await read(join(dir, "cpu.max"))})`;
}

async function pgbench(cs: string, args: string[]): Promise<string> {
  const url = new URL(cs);
  const { stdout } = await run(
    "pgbench",
    ["-h", "127.0.0.1", "-p", url.port, "-U", decodeURIComponent(url.username), ...args, url.pathname.slice(1)],
    {
      env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password), PGSSLMODE: "require" },
      maxBuffer: 1 << 24,
    },
  );
  return stdout;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/**
 * The pairs' ratios head / baseline, split by which tree went first (baseline in the even pairs). In the first run
 * the tree that went first in a round was the faster one by 10–30 %, whichever it was; alternating cancels such an
 * order effect only in the two halves together, here their geometric mean.
 */
function byOrder(ratios: number[]): string {
  const first = { baseline: ratios.filter((_, i) => i % 2 === 0), head: ratios.filter((_, i) => i % 2 === 1) };
  const both = Math.sqrt(median(first.baseline) * median(first.head));
  return (
    `baseline first ${median(first.baseline).toFixed(3)} (${first.baseline.length}), head first ${median(first.head).toFixed(3)} ` +
    `(${first.head.length}); their geometric mean ${both.toFixed(3)}`
  );
}

async function startSide(root: string | undefined, label: string): Promise<Side> {
  const t0 = performance.now();
  const stack = await startStack({
    ...(root && { root }),
    agents: "fsn1",
    env: { LOG_LEVEL: "silent", AGENT_CAPACITY: String(CREATES + 4) },
    readyTimeoutMs: 300_000,
  });
  log(`  ${label} stack ready in ${((performance.now() - t0) / 1000).toFixed(0)} s at ${stack.baseUrl}`);
  return { stack, api: await account(stack, `iso-${label}`) };
}

export async function treesMain(): Promise<void> {
  if (!BASELINE_REF) throw new Error("BENCH_ISOLATION_BASELINE_REF names the commit to compare with");
  if (process.getuid?.() !== 0) throw new Error("run as root: this tree's agent isolates servers only as root");
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  const head = (await run("git", ["rev-parse", "--short", "HEAD"])).stdout.trim();
  const baseline = (await run("git", ["rev-parse", "--short", BASELINE_REF])).stdout.trim();
  // The first commit naming AGENT_TENANT_UID_RANGE brought per-tenant uids and cgroups.
  const first = (await run("git", ["log", "--reverse", "--format=%h", "-S", "AGENT_TENANT_UID_RANGE", "HEAD"])).stdout.split("\n")[0]!;
  const firstParent = (await run("git", ["rev-parse", "--short", `${first}^`])).stdout.trim();
  const since = Number((await run("git", ["rev-list", "--count", `${first}..HEAD`])).stdout.trim());
  const loadStart = load();
  const benchStart = performance.now();
  log(`machine ${machine}, load ${loadStart.toFixed(2)}; baseline ${baseline}, this tree ${head}`);
  await withBaselineTree(BASELINE_REF, log, async (baseRoot) => {
    const sides: Partial<Record<Tree, Side>> = {};
    try {
      // One after the other: each builds its templates and metadata database at start.
      sides.baseline = await startSide(baseRoot, "baseline");
      sides.head = await startSide(undefined, "head");
      const s = sides as Record<Tree, Side>;

      const creates: Record<Tree, number[]> = { baseline: [], head: [] };
      const createLoad: number[] = [];
      for (let i = 0; i < CREATES; i++) {
        for (const tree of i % 2 ? [...TREES].reverse() : TREES) creates[tree].push(await createOne(s[tree].api, `iso-${i}`));
        createLoad.push(load());
        log(
          `create → running ${i + 1}/${CREATES}: baseline ${fmt(creates.baseline[i]!)} ms, head ${fmt(creates.head[i]!)} ms (load ${createLoad[i]!.toFixed(1)})`,
        );
      }

      const dbs = {} as Record<Tree, { id: string; cs: string }>;
      for (const tree of TREES) {
        const res = await s[tree].api.post("/v1/databases", { name: `pgbench-${tree}`, region: "fsn1", tier: TIER });
        if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
        dbs[tree] = { id: res.body.data.id, cs: res.body.data.connection_string };
      }
      for (const tree of TREES) {
        await waitRunning(s[tree].api, dbs[tree].id, "running", 300_000);
        const t0 = performance.now();
        await pgbench(dbs[tree].cs, ["-i", "-q", "-s", String(SCALE)]);
        log(`  ${tree}: ${dbs[tree].id} (${TIER}) initialised at scale ${SCALE} in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
      }
      const identity = {} as Record<Tree, string>;
      for (const tree of TREES) {
        identity[tree] = await serverIdentity(s[tree].stack, dbs[tree].id);
        log(`  ${tree} server: ${identity[tree]}`);
      }
      // Let the first base backups (taken once each database runs) finish before measuring.
      await sleep(30_000);

      const roundLoad: number[] = [];
      const rounds = async (what: string): Promise<Record<Tree, number[]>> => {
        const tps: Record<Tree, number[]> = { baseline: [], head: [] };
        for (let r = 0; r < ROUNDS; r++) {
          for (const tree of r % 2 ? [...TREES].reverse() : TREES) {
            const out = await pgbench(dbs[tree].cs, [
              "-S",
              "-M",
              "prepared",
              "-n",
              "-c",
              String(CLIENTS),
              "-j",
              "2",
              "-T",
              String(SECONDS),
            ]);
            const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
            if (!m) throw new Error(`no tps in pgbench output:\n${out}`);
            tps[tree].push(Number(m[1]));
          }
          roundLoad.push(load());
          log(
            `pgbench (${what}) round ${r + 1}/${ROUNDS}: baseline ${fmt(tps.baseline[r]!)} tps, head ${fmt(tps.head[r]!)} tps, ` +
              `ratio ${(tps.head[r]! / tps.baseline[r]!).toFixed(3)} (load ${roundLoad.at(-1)!.toFixed(1)})`,
          );
        }
        return tps;
      };
      const tps = await rounds("as shipped");
      // The same again with head's server cgroup (and the agent's parent above it) weighing what its busy backends
      // weigh as processes of the agent's cgroup, where the baseline's server runs (cgroup-weight.ts).
      const weight = EQUAL_WEIGHT ? await setWeight(await instanceDir(s.head.stack, dbs.head.id), CLIENTS) : "";
      const tpsEqual = EQUAL_WEIGHT ? await rounds(weight) : undefined;
      const loadEnd = load();
      const minutes = ((performance.now() - benchStart) / 60_000).toFixed(0);

      const c = { baseline: summary(creates.baseline), head: summary(creates.head) };
      const createRatios = creates.head.map((x, i) => x / creates.baseline[i]!);
      const spread = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
      const ratiosOf = (t: Record<Tree, number[]>) => t.head.map((x, i) => x / t.baseline[i]!);
      const tpsRatios = ratiosOf(tps);
      const tpsRow = (label: string, t: Record<Tree, number[]>) =>
        `| ${label} | ${fmt(median(t.baseline))} | ${fmt(median(t.head))} | **${(median(t.head) / median(t.baseline)).toFixed(3)}** ` +
        `(median of the rounds' own ratios ${median(ratiosOf(t)).toFixed(3)}, spread ${spread(ratiosOf(t))}) |`;
      const body = [
        `Command: \`BENCH_ISOLATION_BASELINE_REF=${BASELINE_REF} npm run bench:isolation\` (test/bench/isolation-trees-bench.ts;`,
        `BENCH_ISOLATION_CREATES=${CREATES}, BENCH_ISOLATION_ROUNDS=${ROUNDS}, BENCH_ISOLATION_SECONDS=${SECONDS},`,
        `BENCH_ISOLATION_CLIENTS=${CLIENTS}, BENCH_ISOLATION_SCALE=${SCALE}, BENCH_ISOLATION_TIER=${TIER}), run as root, ${minutes} min.`,
        `Machine: ${machine}, shared with other engineers' tests: 1-minute load average ${loadStart.toFixed(1)} at the start,`,
        `${loadEnd.toFixed(1)} at the end (${spread(roundLoad)} over the pgbench rounds): compare the ratios, not the absolute numbers.`,
        "",
        `Two whole local stacks as \`npm start\` runs them (one agent each, the embedded metadata PostgreSQL), up at the same`,
        `time: **baseline** ${baseline} (${baseline === firstParent ? "the parent of" : `not the parent (${firstParent}) of`} ${first}, the commit that brought per-tenant uids and cgroups: every`,
        `server as \`nobody\`, in the agent's cgroup), from a git worktree with its own \`npm install\`, and **head** ${head}`,
        "(this tree: every server a uid of its own from AGENT_TENANT_UID_RANGE and a cgroup with its tier's limits). The",
        `pgbench servers: baseline ${identity.baseline}; head ${identity.head}.`,
        "Alternating which tree goes first in each create and each round.",
        "",
        "| measurement | baseline | head | head / baseline |",
        "|---|---|---|---|",
        `| create → running, micro, through the API (POST until GET shows running, polled every 20 ms; each deleted after), ` +
          `${CREATES} each: p50 ms | ${fmt(c.baseline.p50)} | ${fmt(c.head.p50)} | **${(c.head.p50 / c.baseline.p50).toFixed(3)}** ` +
          `(median of the pairs' own ratios ${median(createRatios).toFixed(3)}, spread ${spread(createRatios)}) |`,
        `| the same, p95 ms (min, max) | ${fmt(c.baseline.p95)} (${fmt(c.baseline.min)}, ${fmt(c.baseline.max)}) | ` +
          `${fmt(c.head.p95)} (${fmt(c.head.min)}, ${fmt(c.head.max)}) | ${(c.head.p95 / c.baseline.p95).toFixed(3)} |`,
        tpsRow(
          `pgbench select-only TPS (-S -M prepared, TLS through the published port), ${TIER}, ${CLIENTS} clients, scale ${SCALE}, ` +
            `${ROUNDS} rounds of ${SECONDS} s, median: as shipped`,
          tps,
        ),
        ...(tpsEqual
          ? [tpsRow(`the same, then, with head's server cgroup and its parent at ${weight} (${CLIENTS} processes' worth)`, tpsEqual)]
          : []),
        "",
        "The median ratio of the pairs by which tree went first (the order's own effect cancels in their geometric mean): " +
          `create → running ${byOrder(createRatios)}; pgbench as shipped ${byOrder(tpsRatios)}` +
          `${tpsEqual ? `; at equal weight ${byOrder(ratiosOf(tpsEqual))}` : ""}.`,
        "",
        `Creates, ms: baseline ${creates.baseline.map(fmt).join(", ")}; head ${creates.head.map(fmt).join(", ")}.`,
        `TPS per round as shipped: baseline ${tps.baseline.map(fmt).join(", ")}; head ${tps.head.map(fmt).join(", ")}.`,
        ...(tpsEqual
          ? [`At equal weight: baseline ${tpsEqual.baseline.map(fmt).join(", ")}; head ${tpsEqual.head.map(fmt).join(", ")}.`]
          : []),
        `Load after each round: ${roundLoad.map((x) => x.toFixed(1)).join(", ")}.`,
        "",
        "Why a second pgbench series: head's server is one cgroup, one scheduling entity of its tier's CPU weight (small:",
        "cpu.shares 2048) however many of its backends are busy, while the baseline's eight busy backends run in the agent's",
        "cgroup, here the machine's root one, each weighing 1024 beside every other engineer's processes. Under load that",
        "gives head's server a smaller share of the CPU: the fairness between tenants the cgroups are for, not isolation's",
        "own work. At equal weight what is left between the columns is the uid, the cgroup's accounting and everything",
        "else the trees differ in.",
        "",
        `What the two trees differ in: ${first} is one commit recovering several sessions' work (HA, trusted sources and`,
        `the pooler, logs and queries, scale-out, …) beside the isolation, and ${since} more commits followed it, so head /`,
        'baseline is everything since, not isolation alone. The one-tree comparison (section "Tenant isolation: per-tenant',
        'uid + cgroup vs the shared-uid fallback": the same code, the agent as root or as nobody) separates the per-tenant',
        "uid and the cgroup from the rest.",
      ].join("\n");
      process.stdout.write(`\n${body}\n`);
      await writeSection("Tenant isolation, two trees: this tree vs the commit before it (BENCH_ISOLATION_BASELINE_REF)", body);
      log("written to docs/benchmarks.md");
    } finally {
      for (const tree of TREES) await sides[tree]?.stack.destroy();
    }
  });
}
