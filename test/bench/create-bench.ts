/**
 * `npm run bench`: create→running latency through the public API against the
 * real local stack, next to a bare `initdb` + `pg_ctl start` of the same
 * PostgreSQL binaries measured in the same run. Prints the numbers and
 * writes them to docs/benchmarks.md.
 */
import { chown, mkdtemp, rm } from "node:fs/promises";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { findServerBinaries } from "../../services/provisioner-agent/src/instances/binaries.ts";
import { resolveRunAs, runCommand } from "../../services/provisioner-agent/src/instances/run-as.ts";
import { createApi } from "../support/api.ts";
import { freePortBlock, startStack } from "../support/stack.ts";
import { fmt, summary, writeSection, runBench } from "./report.ts";

const COUNT = Number(process.env.BENCH_COUNT ?? 20);

/** The floor: what creating and starting a brand-new cluster costs with no control plane at all. */
async function bareInitdbAndStart(runs: number): Promise<number[]> {
  const bin = findServerBinaries().get("17")!;
  const runAs = resolveRunAs(process.env.AGENT_RUN_AS_USER ?? "nobody");
  const dir = await mkdtemp(join(tmpdir(), "bench-initdb-"));
  await chown(dir, runAs.uid, runAs.gid);
  const port = await freePortBlock(1);
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const data = join(dir, `d${i}`);
    const t0 = performance.now();
    await runCommand(bin.initdb, ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"], { runAs });
    await runCommand(
      bin.pgCtl,
      ["-D", data, "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, "-l", join(dir, `d${i}.log`), "-w", "start"],
      { runAs },
    );
    times.push(performance.now() - t0);
    await runCommand(bin.pgCtl, ["-D", data, "-m", "immediate", "-w", "stop"], { runAs });
  }
  await rm(dir, { recursive: true, force: true });
  return times;
}

async function createToRunning(baseUrl: string, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    // One organization per database keeps every request within the free plan's limits.
    const api = createApi(baseUrl);
    await api.signup(`bench${i}`);
    const t0 = performance.now();
    const res = await api.post("/v1/databases", { name: `bench-${i}`, region: "fsn1", tier: "micro" });
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
    const id = res.body.data.id;
    for (;;) {
      const got = await api.get(`/v1/databases/${id}`);
      if (got.body.data?.status === "running") break;
      if (got.status !== 200 || got.body.data?.status === "failed") throw new Error(`unexpected: ${JSON.stringify(got.body)}`);
      if (performance.now() - t0 > 30_000) throw new Error(`${id} not running after 30 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    times.push(performance.now() - t0);
  }
  return times;
}

async function main() {
  process.stdout.write(`machine: ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB\n`);
  process.stdout.write("baseline: bare initdb + pg_ctl start (5 runs)…\n");
  const bare = summary(await bareInitdbAndStart(5));
  process.stdout.write(`  p50 ${fmt(bare.p50)} ms, p95 ${fmt(bare.p95)} ms\n`);

  process.stdout.write(`starting the local stack and creating ${COUNT} databases…\n`);
  const stack = await startStack({ env: { LOG_LEVEL: "silent", AGENT_CAPACITY: String(COUNT + 5) } });
  let create: ReturnType<typeof summary>;
  try {
    create = summary(await createToRunning(stack.baseUrl, COUNT));
  } finally {
    await stack.destroy();
  }
  process.stdout.write(
    `  create→running p50 ${fmt(create.p50)} ms, p95 ${fmt(create.p95)} ms (min ${fmt(create.min)}, max ${fmt(create.max)})\n`,
  );
  const ratio = create.p50 / bare.p50;
  process.stdout.write(`  ratio to bare initdb+start (p50): ${ratio.toFixed(2)}\n`);

  await writeSection(
    "Create → running",
    [
      "Command: `npm run bench` (test/bench/create-bench.ts). Whole local stack (embedded metadata PostgreSQL, every",
      "service its own process), databases created one after another through the public API; the clock runs from",
      "sending `POST /v1/databases` until `GET /v1/databases/{id}` first shows `running` (polled every 20 ms).",
      `Machine: ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, shared and noisy — compare the ratio, not the absolute numbers.`,
      "",
      "| measurement | runs | p50 ms | p95 ms | min ms | max ms |",
      "|---|---|---|---|---|---|",
      `| create → running via API | ${COUNT} | ${fmt(create.p50)} | ${fmt(create.p95)} | ${fmt(create.min)} | ${fmt(create.max)} |`,
      `| baseline: bare initdb + pg_ctl start | 5 | ${fmt(bare.p50)} | ${fmt(bare.p95)} | ${fmt(bare.min)} | ${fmt(bare.max)} |`,
      "",
      `Ratio create→running p50 / bare initdb+start p50: **${ratio.toFixed(2)}** (target: create→running p50 < 500 ms).`,
      "The agent copies a per-version template data directory instead of running initdb, which is why the",
      "full path can beat a bare initdb.",
    ].join("\n"),
  );
  process.stdout.write(`written to docs/benchmarks.md\n`);
}

runBench(main);
