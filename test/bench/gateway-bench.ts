/**
 * `npm run bench:gateway`: throughput and latency of `GET /v1/databases/{id}`
 * through the full path (auth, rate limit, Connect call, PostgreSQL) against a
 * bare Express route returning the same JSON, same machine, same run.
 */
import { execFile, spawn } from "node:child_process";
import { cpus, totalmem } from "node:os";
import { promisify } from "node:util";
import autocannon from "autocannon";
import { createApi } from "../support/api.ts";
import { startStack } from "../support/stack.ts";
import { writeSection } from "./report.ts";

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);

interface Result {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function load(url: string, headers: Record<string, string>): Promise<Result> {
  // A short warm-up so JIT and connection set-up are not measured.
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers });
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

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
    const sample = await api.get(`/v1/databases/${id}`);
    if (sample.status !== 200) throw new Error(`GET failed: ${sample.status} ${JSON.stringify(sample.body)}`);

    bare = spawn(process.execPath, ["--import", "tsx", "test/bench/bare-express.ts"], {
      env: { ...process.env, BARE_BODY: JSON.stringify(sample.body) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const bareUrl = await new Promise<string>((resolve) => bare!.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())));

    process.stdout.write("bare express…\n");
    const base = await load(`${bareUrl}/v1/databases/${id}`, {});
    process.stdout.write(`  ${base.rps.toFixed(0)} req/s, p50 ${base.p50} ms, p99 ${base.p99} ms\n`);
    process.stdout.write("full path (auth, rate limit, Connect, PostgreSQL)…\n");
    const full = await load(`${stack.baseUrl}/v1/databases/${id}`, { authorization: `Bearer ${token}` });
    process.stdout.write(`  ${full.rps.toFixed(0)} req/s, p50 ${full.p50} ms, p99 ${full.p99} ms, non-2xx ${full.non2xx}, errors ${full.errors}\n`);
    const ratio = full.rps / base.rps;
    process.stdout.write(`ratio full/bare req/s: ${ratio.toFixed(2)} (target ≥ 0.5); full-path p99 ${full.p99} ms (target < 25 ms)\n`);
    const redis = process.env.REDIS_URL ? `Redis at ${process.env.REDIS_URL}` : "in-process limiter (REDIS_URL unset)";

    await writeSection(
      "Gateway throughput",
      [
        "Command: `npm run bench:gateway` (test/bench/gateway-bench.ts): autocannon, " +
          `${CONNECTIONS} connections, ${DURATION} s after a 2 s warm-up, against \`GET /v1/databases/{id}\`.`,
        `Machine: ${machine}, shared and noisy; the load generator runs on the same 2 cores. Rate limiter: ${redis}.`,
        "",
        "| target | req/s | p50 ms | p99 ms | non-2xx |",
        "|---|---|---|---|---|",
        `| full path: auth (cached) → rate limit → Connect/HTTP2 → databases → PostgreSQL | ${full.rps.toFixed(0)} | ${full.p50} | ${full.p99} | ${full.non2xx} |`,
        `| bare Express, same JSON | ${base.rps.toFixed(0)} | ${base.p50} | ${base.p99} | ${base.non2xx} |`,
        "",
        `Ratio full/bare: **${ratio.toFixed(2)}** (target ≥ 0.5); full-path p99 ${full.p99} ms (target < 25 ms).`,
      ].join("\n"),
    );
    process.stdout.write("written to docs/benchmarks.md\n");
  } finally {
    bare?.kill("SIGTERM");
    await stack.destroy();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
    process.exit(1);
  },
);
