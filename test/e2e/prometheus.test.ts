/**
 * A real Prometheus (Debian's `prometheus`) scrapes every process of the local
 * stack — gateway, identity, databases, billing, the agent — at /metrics on
 * its own port every second, and answers queries about the API calls made.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { localStackLayout, stackPorts } from "@dbaas/kit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createApi, waitFor, waitStatus } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { freePortBlock, startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;
let prometheus: ChildProcess | undefined;
let promUrl: string;
let promDir: string;
let promOutput = "";
let jobs: string[];

/** The scrape config: one job per process of the stack, named as the runner names it. */
function scrapeConfig(targets: Array<{ name: string; port: number }>): string {
  const lines = ["global:", "  scrape_interval: 1s", "  scrape_timeout: 1s", "scrape_configs:"];
  for (const t of targets) {
    lines.push(`  - job_name: ${JSON.stringify(t.name)}`, "    static_configs:", `      - targets: ["127.0.0.1:${t.port}"]`);
  }
  return `${lines.join("\n")}\n`;
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** An instant query through Prometheus' HTTP API. */
async function query(promql: string): Promise<Sample[]> {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as { status: string; data: { resultType: string; result: Sample[] }; error?: string };
  if (body.status !== "success") throw new Error(`query ${promql} failed: ${body.error}`);
  return body.data.result;
}

/** The single value a query answers, or undefined when it answers nothing. */
async function scalar(promql: string): Promise<number | undefined> {
  const result = await query(promql);
  return result.length === 0 ? undefined : Number(result[0]!.value[1]);
}

beforeAll(async () => {
  // Without the binary the test fails, naming it: .ci/run installs the package.
  execFileSync("prometheus", ["--version"], { stdio: "ignore" });
  meta = await createTestDatabase("e2e_prometheus");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: { REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" },
  });
  const targets = stackPorts(localStackLayout(stack.env), false);
  jobs = targets.map((t) => t.name);
  promDir = await mkdtemp(join(tmpdir(), "dbaas-prometheus-"));
  await writeFile(join(promDir, "prometheus.yml"), scrapeConfig(targets));
  const port = await freePortBlock(1);
  promUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn(
    "prometheus",
    [
      `--config.file=${join(promDir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(promDir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  prometheus.stdout!.on("data", (c: Buffer) => (promOutput += c.toString()));
  prometheus.stderr!.on("data", (c: Buffer) => (promOutput += c.toString()));
  await waitFor(async () => (await fetch(`${promUrl}/-/ready`)).ok, 30_000, `Prometheus ready\n${promOutput.slice(-2000)}`, {
    everyMs: 100,
  });
}, 180_000);

afterAll(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((r) => prometheus!.once("exit", r));
    prometheus.kill("SIGTERM");
    await exited;
  }
  await stack?.destroy();
  await meta?.drop();
  if (promDir) await rm(promDir, { recursive: true, force: true });
});

it("scrapes every process of the stack", async () => {
  expect(jobs).toEqual(["gateway", "identity", "databases", "billing", "agent-fsn1"]);
  const up = await waitFor(
    async () => {
      const result = await query("up");
      return result.length === jobs.length && result.every((s) => s.value[1] === "1") ? result : undefined;
    },
    30_000,
    "every target up",
  );
  expect(up.map((s) => s.metric.job).sort()).toEqual([...jobs].sort());
}, 60_000);

// The sum of its waits (running, then Prometheus's: six of 30 s, waitFor's default included, two of 10 s) and a
// margin: a wait that sticks fails naming itself, not as a bare "Test timed out".
it("answers questions about the API calls made, from every layer", { timeout: 120_000 + 6 * 30_000 + 2 * 10_000 + 15_000 }, async () => {
  const api = createApi(stack.baseUrl);
  await api.signup("prom");
  for (let i = 0; i < 3; i++) expect((await api.get("/v1/databases")).status).toBe(200);
  const created = await api.post("/v1/databases", { name: "scraped", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  await waitStatus(api, id, "running", 120_000, () => stack.output());

  // The gateway, by route template.
  await waitFor(async () => ((await scalar('sum(http_requests_total{job="gateway",route="/v1/databases",method="GET"})')) ?? 0) >= 3);
  await waitFor(async () => ((await scalar('sum(http_requests_total{job="gateway",route="/v1/databases/:id",status="200"})')) ?? 0) >= 1);
  expect(await query('http_requests_total{job="gateway",route=~".*db-.*"}')).toEqual([]);
  // The services behind it: the RPCs those calls made.
  await waitFor(
    async () => ((await scalar('sum(rpc_requests_total{job="databases",method="CreateDatabase",code="ok"})')) ?? 0) >= 1,
    10_000,
    "CreateDatabase counted",
  );
  // The gateway caches principals: at least the first call authenticated.
  await waitFor(async () => ((await scalar('sum(rpc_requests_total{job="identity",method="Authenticate"})')) ?? 0) >= 1);
  expect(await scalar('sum(rpc_duration_seconds_count{job="databases"})')).toBeGreaterThan(0);
  // The agent runs the database it was asked for.
  await waitFor(async () => (await scalar('instances{job="agent-fsn1",status="running"}')) === 1, 10_000, "instances running");
  expect(await scalar('reconcile_errors_total{job="agent-fsn1"}')).toBeGreaterThanOrEqual(0);
  expect(await scalar('wal_spool_bytes{job="agent-fsn1"}')).toBeGreaterThanOrEqual(0);
  // Its first base backup, taken as soon as it runs, is counted.
  await waitFor(
    async () => ((await scalar('base_backups_total{job="agent-fsn1",result="completed"}')) ?? 0) >= 1,
    30_000,
    "a completed base backup counted",
  );
  // Each service's outbox is read; the databases service's status events reach billing.
  for (const job of ["identity", "databases", "billing"]) {
    expect(await scalar(`outbox_depth{job="${job}"}`), job).toBeGreaterThanOrEqual(0);
    expect(await scalar(`outbox_oldest_age_seconds{job="${job}"}`), job).toBeGreaterThanOrEqual(0);
  }
  await waitFor(async () => (await scalar('outbox_depth{job="databases"}')) === 0, 30_000, "the databases outbox drained");
  // Redis serves the limits.
  expect(await scalar('rate_limiter_degraded{job="gateway"}')).toBe(0);
  // Default process metrics come from every process.
  expect((await query("process_resident_memory_bytes")).length).toBe(jobs.length);
});
