/**
 * `npm run bench:gateway`: throughput and latency of `GET /v1/databases/{id}`
 * through the full path (auth, rate limit, Connect call, PostgreSQL) against a
 * bare Express route returning the same JSON, same machine, same run. Also
 * where the CPU goes: CPU time per request of every process involved, read
 * from /proc, so the ratio can be explained and not just printed.
 */
import { execFile, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { promisify } from "node:util";
import autocannon from "autocannon";
import { createApi, waitFor } from "../support/api.ts";
import { startStack, type Stack } from "../support/stack.ts";
import { writeSection, runBench } from "./report.ts";

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
// The machine is shared: bare and full runs alternate, and the median round is reported.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
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

async function load(url: string, headers: Record<string, string>, named: Map<number, string>, dataDir: string): Promise<Result> {
  // A short warm-up so JIT and connection set-up are not measured.
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers });
  const before = processes();
  const selfBefore = process.cpuUsage();
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  const self = process.cpuUsage(selfBefore);
  const after = processes();
  const name = classify(after, named, dataDir);
  const cpu = new Map<string, number>([["load generator (autocannon)", (self.user + self.system) / r.requests.total]]);
  for (const [pid, p] of after) {
    if (pid === process.pid) continue;
    const used = (p.ticks - (before.get(pid)?.ticks ?? 0)) * TICK_US;
    if (used > 0) cpu.set(name(pid), (cpu.get(name(pid)) ?? 0) + used / r.requests.total);
  }
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, cpu };
}

async function servicePids(stack: Stack): Promise<Map<number, string>> {
  const named = new Map<number, string>();
  for (const service of ["gateway", "identity", "databases", "billing", "agent-fsn1"]) {
    named.set(await stack.pid(service), service === "agent-fsn1" ? "provisioner agent" : `${service} service`);
  }
  return named;
}

const us = (n: number | undefined) => (n === undefined ? "–" : n.toFixed(0));

async function main() {
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  process.stdout.write(`machine: ${machine}; ${CONNECTIONS} connections, ${DURATION} s per run\n`);
  const stack = await startStack({ agents: "fsn1", env: { LOG_LEVEL: "silent" } });
  let bare: ReturnType<typeof spawn> | undefined;
  try {
    const api = createApi(stack.baseUrl);
    const account = await api.signup("gwbench");
    // The benchmark organization is on the internal plan: the limiter runs on every request
    // (one Redis round trip) but no request reaches its limit.
    await promisify(execFile)(process.execPath, ["--import", "tsx", "services/identity/src/cli/set-plan.ts", account.organization.id, "internal"], {
      env: { ...process.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}`, DBAAS_DATA_DIR: stack.dataDir },
    });
    const login = await api.post("/v1/auth/token", { email: account.email, password: account.password });
    const token = login.body.data.access_token as string;
    api.setToken(token);
    const created = await api.post("/v1/databases", { name: "bench", region: "fsn1", tier: "micro" });
    const id = created.body.data.id as string;
    // Provisioning (copying the data directory, starting PostgreSQL) must not overlap either run.
    const sample = await waitFor(async () => {
      const res = await api.get(`/v1/databases/${id}`);
      return res.status === 200 && res.body.data.status === "running" ? res : undefined;
    }, 60_000, "the benchmark database running");

    bare = spawn(process.execPath, ["--import", "tsx", "test/bench/bare-express.ts"], {
      env: { ...process.env, BARE_BODY: JSON.stringify(sample.body) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const bareUrl = await new Promise<string>((resolve) => bare!.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())));
    const named = await servicePids(stack);
    named.set(bare.pid!, "bare Express");

    const rounds: Array<{ base: Result; full: Result }> = [];
    for (let round = 1; round <= ROUNDS; round++) {
      process.stdout.write(`round ${round}/${ROUNDS}: bare express…\n`);
      const b = await load(`${bareUrl}/v1/databases/${id}`, {}, named, stack.dataDir);
      process.stdout.write(`  ${b.rps.toFixed(0)} req/s, p50 ${b.p50} ms, p99 ${b.p99} ms\n`);
      process.stdout.write("  full path (auth, rate limit, Connect, PostgreSQL)…\n");
      const f = await load(`${stack.baseUrl}/v1/databases/${id}`, { authorization: `Bearer ${token}` }, named, stack.dataDir);
      process.stdout.write(`  ${f.rps.toFixed(0)} req/s, p50 ${f.p50} ms, p99 ${f.p99} ms, non-2xx ${f.non2xx}, errors ${f.errors}; ratio ${(f.rps / b.rps).toFixed(2)}\n`);
      rounds.push({ base: b, full: f });
    }
    const ratios = rounds.map((r) => r.full.rps / r.base.rps);
    const median = [...rounds].sort((x, y) => x.full.rps / x.base.rps - y.full.rps / y.base.rps)[Math.floor(ROUNDS / 2)]!;
    const { base, full } = median;
    const ratio = full.rps / base.rps;
    process.stdout.write(`median round: ratio full/bare req/s ${ratio.toFixed(2)} (target ≥ 0.5); full-path p99 ${full.p99} ms (target < 25 ms)\n`);
    const redis = process.env.REDIS_URL ? `Redis at ${process.env.REDIS_URL}` : "in-process limiter (REDIS_URL unset)";

    const components = [...new Set([...full.cpu.keys(), ...base.cpu.keys()])]
      .filter((c) => c !== "other" && ((full.cpu.get(c) ?? 0) >= 1 || (base.cpu.get(c) ?? 0) >= 1))
      .sort((a, b) => (full.cpu.get(b) ?? 0) - (full.cpu.get(a) ?? 0));
    const total = (r: Result) => [...r.cpu].filter(([c]) => c !== "other").reduce((s, [, v]) => s + v, 0);
    const cpuRows = components.map((c) => `| ${c} | ${us(full.cpu.get(c))} | ${us(base.cpu.get(c))} |`);
    for (const row of [...cpuRows, `| total | ${us(total(full))} | ${us(total(base))} |`]) process.stdout.write(`  ${row}\n`);
    const cores = cpus().length;

    await writeSection(
      "Gateway throughput",
      [
        "Command: `REDIS_URL=redis://127.0.0.1:6379 npm run bench:gateway` (test/bench/gateway-bench.ts): autocannon, " +
          `${CONNECTIONS} connections, ${DURATION} s after a 2 s warm-up, against \`GET /v1/databases/{id}\`; ` +
          `${ROUNDS} rounds alternating bare and full path, the median round (by ratio) reported.`,
        `Machine: ${machine}, shared and noisy; the load generator runs on the same ${cores} cores. Rate limiter: ${redis}.`,
        "",
        "| target | req/s | p50 ms | p99 ms | non-2xx |",
        "|---|---|---|---|---|",
        `| full path: auth (cached) → rate limit → Connect/HTTP2 → databases → PostgreSQL | ${full.rps.toFixed(0)} | ${full.p50} | ${full.p99} | ${full.non2xx} |`,
        `| bare Express, same JSON | ${base.rps.toFixed(0)} | ${base.p50} | ${base.p99} | ${base.non2xx} |`,
        "",
        `Ratio full/bare: **${ratio.toFixed(2)}** (target ≥ 0.5); full-path p99 ${full.p99} ms (target < 25 ms). ` +
          `Ratios of all rounds: ${ratios.map((r) => r.toFixed(2)).join(", ")}.`,
        "",
        "Where the CPU goes: CPU time (user + system, from /proc) per request of each process during the measured run, µs.",
        "",
        "| process | full path µs/req | bare µs/req |",
        "|---|---|---|",
        ...cpuRows,
        `| total | ${us(total(full))} | ${us(total(base))} |`,
        "",
        `CPU cost ratio (bare total / full total, steadier than req/s on a shared machine): **${(total(base) / total(full)).toFixed(2)}**.`,
        "",
        `With ${cores} cores the full path cannot exceed ${((cores * 1e6) / total(full)).toFixed(0)} req/s at this cost ` +
          `(bare: ${((cores * 1e6) / total(base)).toFixed(0)}): every request crosses four processes (gateway, Redis, databases ` +
          "service, PostgreSQL) where the bare route crosses one, and each crossing is a socket write and a wake-up on each side.",
      ].join("\n"),
    );
    process.stdout.write("written to docs/benchmarks.md\n");
  } finally {
    bare?.kill("SIGTERM");
    await stack.destroy();
  }
}

runBench(main);
