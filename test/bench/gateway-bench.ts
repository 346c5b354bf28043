/**
 * `npm run bench:gateway`: throughput and latency of `GET /v1/databases/{id}`
 * through the full path (auth, rate limit, Connect call, PostgreSQL) against a
 * bare Express route returning the same JSON, same machine, same run. Also
 * where the CPU goes: CPU time per request of every process involved, read
 * from /proc, so the ratio can be explained and not just printed.
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import autocannon from "autocannon";
import { createApi, waitFor } from "../support/api.ts";
import { startStack, type Stack } from "../support/stack.ts";
import { writeSection, runBench } from "./report.ts";

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
// The machine is shared: bare and full runs alternate, and the median round is reported.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
// Linux reports process CPU time in clock ticks of 10 ms.
const TICK_US = 10_000;

interface Result {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** CPU microseconds per request, by component. */
  cpu: Map<string, number>;
}

interface Proc {
  ppid: number;
  ticks: number;
  cmdline: string;
}

function processes(): Map<number, Proc> {
  const out = new Map<number, Proc>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after "(comm)": state ppid … utime(14) stime(15), counted from the state.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ");
      out.set(Number(entry), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]), cmdline });
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/** Names every process that matters here; the rest is "other" (the machine is shared). */
function classify(procs: Map<number, Proc>, named: Map<number, string>, dataDir: string): (pid: number) => string {
  const memo = new Map<number, string>();
  const of = (pid: number): string => {
    const hit = memo.get(pid) ?? named.get(pid);
    if (hit) return hit;
    const p = procs.get(pid);
    let name = "other";
    if (p) {
      if (p.cmdline.includes(`${dataDir}/metadata`)) name = "metadata PostgreSQL";
      else if (p.cmdline.includes(`${dataDir}/agents`)) name = "database instance";
      else if (p.cmdline.startsWith("redis-server")) name = "Redis";
      else if (p.ppid > 1) {
        // PostgreSQL backends are children of their postmaster.
        const parent = of(p.ppid);
        if (parent === "metadata PostgreSQL" || parent === "database instance") name = parent;
      }
    }
    memo.set(pid, name);
    return name;
  };
  return of;
}

/** The load generator: wrk when installed (C, a fraction of autocannon's CPU per request), else autocannon. */
const TOOL = process.env.BENCH_TOOL ?? (hasWrk() ? "wrk" : "autocannon");

function hasWrk(): boolean {
  try {
    execFileSync("wrk", ["--version"], { stdio: "ignore" });
    return true;
  } catch (err) {
    // wrk --version exits 1 after printing its version; only a missing binary is ENOENT.
    return (err as NodeJS.ErrnoException).code !== "ENOENT";
  }
}

/** CPU time of this process's waited-for children (wrk), microseconds. */
function childrenCpu(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // cutime and cstime are fields 16 and 17 of stat, 14 and 15 counted from the state.
  return (Number(fields[13]) + Number(fields[14])) * TICK_US;
}

interface Run {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** CPU microseconds the load generator itself used. */
  cpu: number;
}

/** wrk prints latencies as 812.00us, 4.12ms or 1.02s. */
function wrkMs(text: string, label: string): number {
  const m = new RegExp(`^\\s*${label}\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(text);
  if (!m) throw new Error(`wrk output has no ${label} line:\n${text}`);
  const n = Number(m[1]);
  return m[2] === "us" ? n / 1000 : m[2] === "s" ? n * 1000 : n;
}

/** A wrk script sending the paths in turn (wrk.format keeps the -H headers). */
function rotation(paths: readonly string[]): string {
  const file = join(tmpdir(), `gateway-bench-${process.pid}.lua`);
  writeFileSync(
    file,
    [
      `local paths = { ${paths.map((p) => JSON.stringify(p)).join(", ")} }`,
      "local i = 0",
      "request = function()",
      "  i = i % #paths + 1",
      '  return wrk.format("GET", paths[i])',
      "end",
    ].join("\n"),
  );
  return file;
}

async function runWrk(base: string, paths: readonly string[], headers: Record<string, string>, seconds: number): Promise<Run> {
  const cpuBefore = childrenCpu();
  const args = ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "--timeout", "10s"];
  for (const [name, value] of Object.entries(headers)) args.push("-H", `${name}: ${value}`);
  if (paths.length > 1) args.push("-s", rotation(paths));
  const { stdout } = await promisify(execFile)("wrk", [...args, base + paths[0]]);
  const cpu = childrenCpu() - cpuBefore;
  const count = (re: RegExp) => Number(re.exec(stdout)?.[1] ?? 0);
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const requests = count(/(\d+) requests in/);
  return {
    requests,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? 0),
    p50: wrkMs(stdout, "50%"),
    p99: wrkMs(stdout, "99%"),
    non2xx: count(/Non-2xx or 3xx responses: (\d+)/),
    errors: socketErrors ? socketErrors.slice(1).reduce((s, n) => s + Number(n), 0) : 0,
    cpu,
  };
}

async function runAutocannon(base: string, paths: readonly string[], headers: Record<string, string>, seconds: number): Promise<Run> {
  const before = process.cpuUsage();
  const r = await autocannon({
    url: base,
    connections: CONNECTIONS,
    duration: seconds,
    headers,
    // Each connection sends the paths in turn.
    requests: paths.map((path) => ({ method: "GET", path })),
  });
  const self = process.cpuUsage(before);
  return {
    requests: r.requests.total,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    cpu: self.user + self.system,
  };
}

const drive = TOOL === "wrk" ? runWrk : runAutocannon;

async function load(
  base: string,
  paths: readonly string[],
  headers: Record<string, string>,
  named: Map<number, string>,
  dataDir: string,
): Promise<Result> {
  // A short warm-up so JIT and connection set-up are not measured.
  await drive(base, paths, headers, 2);
  const before = processes();
  const r = await drive(base, paths, headers, DURATION);
  const after = processes();
  const name = classify(after, named, dataDir);
  const cpu = new Map<string, number>([[`load generator (${TOOL})`, r.cpu / r.requests]]);
  for (const [pid, p] of after) {
    if (pid === process.pid) continue;
    const used = (p.ticks - (before.get(pid)?.ticks ?? 0)) * TICK_US;
    if (used > 0) cpu.set(name(pid), (cpu.get(name(pid)) ?? 0) + used / r.requests);
  }
  return { rps: r.rps, p50: r.p50, p99: r.p99, non2xx: r.non2xx, errors: r.errors, cpu };
}

async function servicePids(stack: Stack): Promise<Map<number, string>> {
  const named = new Map<number, string>();
  for (const service of ["gateway", "identity", "databases", "billing", "agent-fsn1"]) {
    named.set(await stack.pid(service), service === "agent-fsn1" ? "provisioner agent" : `${service} service`);
  }
  return named;
}

const us = (n: number | undefined) => (n === undefined ? "–" : n.toFixed(0));

interface Scenario {
  /** How the full-path runs of this scenario are described. */
  label: string;
  paths: string[];
  rounds: Array<{ base: Result; full: Result }>;
}

function medianRound(sc: Scenario) {
  const sorted = [...sc.rounds].sort((x, y) => x.full.rps / x.base.rps - y.full.rps / y.base.rps);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const total = (r: Result) => [...r.cpu].filter(([c]) => c !== "other").reduce((sum, [, v]) => sum + v, 0);

/** The scenario's section of docs/benchmarks.md: its median round, all rounds' ratios, where the CPU went. */
function report(sc: Scenario): string[] {
  const { base, full } = medianRound(sc);
  const ratio = full.rps / base.rps;
  const components = [...new Set([...full.cpu.keys(), ...base.cpu.keys()])]
    .filter((c) => c !== "other" && ((full.cpu.get(c) ?? 0) >= 1 || (base.cpu.get(c) ?? 0) >= 1))
    .sort((a, b) => (full.cpu.get(b) ?? 0) - (full.cpu.get(a) ?? 0));
  const cores = cpus().length;
  return [
    `### ${sc.label}`,
    "",
    "| target | req/s | p50 ms | p99 ms | non-2xx |",
    "|---|---|---|---|---|",
    `| full path: auth (cached) → rate limit → Connect/HTTP2 → databases → PostgreSQL | ${full.rps.toFixed(0)} | ${full.p50} | ${full.p99} | ${full.non2xx} |`,
    `| bare Express, same JSON | ${base.rps.toFixed(0)} | ${base.p50} | ${base.p99} | ${base.non2xx} |`,
    "",
    `Ratio full/bare: **${ratio.toFixed(2)}** (target ≥ 0.5); full-path p99 **${full.p99} ms** (target < 25 ms). ` +
      `Ratios of all rounds: ${sc.rounds.map((r) => (r.full.rps / r.base.rps).toFixed(2)).join(", ")}.`,
    "",
    "CPU time (user + system, from /proc) per request of each process during the median round's runs, µs:",
    "",
    "| process | full path µs/req | bare µs/req |",
    "|---|---|---|",
    ...components.map((c) => `| ${c} | ${us(full.cpu.get(c))} | ${us(base.cpu.get(c))} |`),
    `| total | ${us(total(full))} | ${us(total(base))} |`,
    "",
    `CPU cost ratio (bare total / full total, steadier than req/s on a shared machine): **${(total(base) / total(full)).toFixed(2)}**. ` +
      `At this cost ${cores} cores allow at most ${((cores * 1e6) / total(full)).toFixed(0)} req/s on the full path ` +
      `(bare: ${((cores * 1e6) / total(base)).toFixed(0)}).`,
    "",
  ];
}

/** Databases of the spread scenario: more than a coalesced batch would ever see in one event-loop iteration. */
const SPREAD = Number(process.env.BENCH_SPREAD ?? 20);

async function main() {
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  process.stdout.write(`machine: ${machine}; ${TOOL}, ${CONNECTIONS} connections, ${DURATION} s per run\n`);
  const stack = await startStack({ agents: "fsn1", env: { LOG_LEVEL: "silent", AGENT_CAPACITY: String(SPREAD + 5) } });
  let bare: ReturnType<typeof spawn> | undefined;
  try {
    const api = createApi(stack.baseUrl);
    const account = await api.signup("gwbench");
    // The benchmark organization is on the internal plan: the limiter runs on every request
    // (one Redis round trip) but no request reaches its limit.
    await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "services/identity/src/cli/set-plan.ts", account.organization.id, "internal"],
      {
        env: { ...process.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}`, DBAAS_DATA_DIR: stack.dataDir },
      },
    );
    const login = await api.post("/v1/auth/token", { email: account.email, password: account.password });
    const token = login.body.data.access_token as string;
    api.setToken(token);
    // More than the free allowance of 2 micro databases.
    await api.addPaymentMethod();
    const ids: string[] = [];
    for (let i = 0; i < SPREAD; i++) {
      const created = await api.post("/v1/databases", { name: `bench-${i}`, region: "fsn1", tier: "micro" });
      if (created.status !== 201) throw new Error(`creating a benchmark database: ${created.status} ${JSON.stringify(created.body)}`);
      ids.push(created.body.data.id as string);
    }
    // Provisioning (copying data directories, starting PostgreSQL) must not overlap any run.
    const samples = [];
    for (const id of ids) {
      samples.push(
        await waitFor(
          async () => {
            const res = await api.get(`/v1/databases/${id}`);
            return res.status === 200 && res.body.data.status === "running" ? res : undefined;
          },
          120_000,
          `benchmark database ${id} running`,
        ),
      );
    }

    // Only the first database's PostgreSQL keeps running: twenty idle instances wake up often enough
    // (checkpointer, autovacuum, the agent's health checks) to show in the tail latency of every run.
    // A stopped database's GET is the same read of the same record.
    for (const id of ids.slice(1)) {
      const stop = await api.post(`/v1/databases/${id}/stop`, {});
      if (stop.status !== 202 && stop.status !== 200) throw new Error(`stopping ${id}: ${stop.status} ${JSON.stringify(stop.body)}`);
    }
    for (const id of ids.slice(1)) {
      await waitFor(
        async () => {
          const res = await api.get(`/v1/databases/${id}`);
          return res.body.data.status === "stopped" ? res : undefined;
        },
        60_000,
        `benchmark database ${id} stopped`,
      );
    }

    bare = spawn(process.execPath, ["--import", "tsx", "test/bench/bare-express.ts"], {
      env: { ...process.env, BARE_BODY: JSON.stringify(samples[0]!.body) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const bareUrl = await new Promise<string>((resolve) => bare!.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())));
    const named = await servicePids(stack);
    named.set(bare.pid!, "bare Express");

    const scenarios: Scenario[] = [
      { label: "One database (the issue's measurement)", paths: [`/v1/databases/${ids[0]}`], rounds: [] },
      {
        label: `${SPREAD} databases of the organization, requested in turn (no two concurrent requests alike)`,
        paths: ids.map((id) => `/v1/databases/${id}`),
        rounds: [],
      },
    ];
    const auth = { authorization: `Bearer ${token}` };
    for (let round = 1; round <= ROUNDS; round++) {
      process.stdout.write(`round ${round}/${ROUNDS}: bare express…\n`);
      const b = await load(bareUrl, scenarios[0]!.paths, {}, named, stack.dataDir);
      process.stdout.write(`  ${b.rps.toFixed(0)} req/s, p50 ${b.p50} ms, p99 ${b.p99} ms\n`);
      for (const sc of scenarios) {
        process.stdout.write(`  full path, ${sc.label}…\n`);
        const f = await load(stack.baseUrl, sc.paths, auth, named, stack.dataDir);
        process.stdout.write(
          `    ${f.rps.toFixed(0)} req/s, p50 ${f.p50} ms, p99 ${f.p99} ms, non-2xx ${f.non2xx}, errors ${f.errors}; ratio ${(f.rps / b.rps).toFixed(2)}\n`,
        );
        sc.rounds.push({ base: b, full: f });
      }
    }
    for (const sc of scenarios) {
      const { base, full } = medianRound(sc);
      process.stdout.write(
        `${sc.label}: median ratio ${(full.rps / base.rps).toFixed(2)} (target ≥ 0.5), p99 ${full.p99} ms (target < 25 ms), ` +
          `CPU µs/req full ${us(total(full))} bare ${us(total(base))}\n`,
      );
    }
    const redis = process.env.REDIS_URL ? `Redis at ${process.env.REDIS_URL}` : "in-process limiter (REDIS_URL unset)";
    await writeSection(
      "Gateway throughput",
      [
        "Command: `REDIS_URL=redis://127.0.0.1:6379 npm run bench:gateway` (test/bench/gateway-bench.ts): " +
          `${TOOL === "wrk" ? "wrk (one thread)" : "autocannon"}, ${CONNECTIONS} connections, ${DURATION} s after a 2 s warm-up, ` +
          `against \`GET /v1/databases/{id}\`; ${ROUNDS} rounds, each one bare run and one full-path run per scenario; ` +
          "the median round (by ratio) of each scenario reported. The bare route answers the same JSON whatever the id.",
        `Machine: ${machine}, shared and noisy; the load generator runs on the same ${cpus().length} cores. Rate limiter: ${redis}.`,
        "",
        ...scenarios.flatMap(report),
      ].join("\n"),
    );
    process.stdout.write("written to docs/benchmarks.md\n");
  } finally {
    bare?.kill("SIGTERM");
    await stack.destroy();
  }
}

runBench(main);
