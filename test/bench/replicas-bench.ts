/**
 * `npm run bench:replicas`: read replicas on the real local stack (file store, one agent). A ~1 GB primary
 * (Debian's pgbench, `pgbench -i -s 70`), then in the same run a base backup of it through the API and a replica
 * of it from create to running (seed backup, fetch and extract, start, streaming), and their ratio. Then the
 * replication lag under a steady pgbench write load on the primary: bytes behind (the record's lag_bytes and
 * pg_stat_replication's replay position, each second) and the milliseconds until a row committed on the primary
 * is visible on the replica (a timestamped row every 500 ms, the replica polled every 5 ms), p50/p95. Prints the
 * numbers and writes them to docs/benchmarks.md.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  backupsOf,
  takeBackup,
  waitBackupsSettled,
  waitFirstBackup,
  waitRestorableThrough,
  waitRunning,
  type Api,
} from "../support/backups.ts";
import { account, asAgent, getReplica, slotName, withPassword } from "../support/replicas.ts";
import { startStack } from "../support/stack.ts";
import { runBench, summary, writeSection, benchLog as log, connectCustomer as connect, secs } from "./report.ts";

const SCALE = Number(process.env.BENCH_PGBENCH_SCALE ?? 70);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 60);
/** pgbench's rate limit (transactions a second) for the write load: steady, not all the machine can do. */
const LAG_TPS = Number(process.env.BENCH_LAG_TPS ?? 200);
const MB = 2 ** 20;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Debian's pgbench against the published port (through the agent's proxy), TLS, as the customer. */
async function pgbench(cs: string, args: string[]): Promise<string> {
  const url = new URL(cs);
  const { stdout, stderr } = await run("pgbench", ["-h", "127.0.0.1", "-p", url.port, "-U", url.username, ...args, url.pathname.slice(1)], {
    env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password), PGSSLMODE: "require" },
    maxBuffer: 1 << 26,
  });
  return stdout + stderr;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

/** POST …/backups, then polls the list every 250 ms until that backup is completed. */
async function backupToCompleted(api: Api, id: string): Promise<{ ms: number; sizeBytes: number }> {
  await waitBackupsSettled(api, id, 600_000);
  const t0 = performance.now();
  const accepted = await takeBackup(api, id);
  for (;;) {
    const b = (await backupsOf(api, id)).backups.find((x) => x.id === accepted.id);
    if (b?.status === "completed") return { ms: performance.now() - t0, sizeBytes: b.size_bytes };
    if (b?.status === "failed") throw new Error(`backup ${accepted.id} failed: ${b.failure_reason}`);
    if (performance.now() - t0 > 30 * 60_000) throw new Error(`backup ${accepted.id} not completed after 30 minutes`);
    await sleep(250);
  }
}

/** POST …/replicas, then polls the replica every 250 ms until it runs. */
async function replicaToRunning(api: Api, id: string, name: string): Promise<{ ms: number; rid: string; cs: string }> {
  const t0 = performance.now();
  const res = await api.post(`/v1/databases/${id}/replicas`, { name });
  if (res.status !== 201) throw new Error(`replica create failed: ${res.status} ${JSON.stringify(res.body)}`);
  const rid = res.body.data.id as string;
  for (;;) {
    const r = await getReplica(api, id, rid);
    if (r?.status === "running") return { ms: performance.now() - t0, rid, cs: r.connection_string };
    if (r?.status === "failed") throw new Error(`replica ${rid} failed: ${r.status_reason}`);
    if (performance.now() - t0 > 30 * 60_000) throw new Error(`replica ${rid} not running after 30 minutes`);
    await sleep(250);
  }
}

interface LagRun {
  visibleMs: number[];
  apiBytes: number[];
  statBytes: number[];
  tps: number;
}

/**
 * LAG_SECONDS of pgbench's TPC-B-like writes at LAG_TPS on the primary; meanwhile a row every 500 ms whose
 * visibility on the replica is timed, and each second the lag in bytes from the API and from pg_stat_replication.
 */
async function lagUnderLoad(
  stack: Awaited<ReturnType<typeof startStack>>,
  api: Api,
  primary: { id: string; cs: string },
  replica: { rid: string; cs: string },
): Promise<LagRun> {
  const writer = await connect(primary.cs);
  const reader = await connect(replica.cs);
  await writer.query("CREATE TABLE ticks (n bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())");
  const out: LagRun = { visibleMs: [], apiBytes: [], statBytes: [], tps: 0 };
  let loaded = true;
  const load = pgbench(primary.cs, ["-n", "-c", "4", "-j", "2", "-T", String(LAG_SECONDS), "-R", String(LAG_TPS)]).finally(() => {
    loaded = false;
  });
  const ticks = (async () => {
    for (let n = 1; loaded; n++) {
      const next = performance.now() + 500;
      await writer.query("INSERT INTO ticks (n) VALUES ($1)", [n]);
      const committed = performance.now();
      for (;;) {
        if ((await reader.query("SELECT 1 FROM ticks WHERE n = $1", [n])).rowCount === 1) break;
        if (performance.now() - committed > 60_000) throw new Error(`row ${n} not on the replica after 60 s`);
        await sleep(5);
      }
      out.visibleMs.push(performance.now() - committed);
      await sleep(Math.max(0, next - performance.now()));
    }
  })();
  const bytes = (async () => {
    while (loaded) {
      const next = performance.now() + 1000;
      const r = await getReplica(api, primary.id, replica.rid);
      if (r) out.apiBytes.push(r.lag_bytes);
      const rows = await asAgent(
        stack,
        primary.id,
        `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint AS behind FROM pg_stat_replication WHERE application_name = '${replica.rid}'`,
      );
      if (rows[0]?.behind != null) out.statBytes.push(Number(rows[0].behind));
      await sleep(Math.max(0, next - performance.now()));
    }
  })();
  const report = await load;
  await Promise.all([ticks, bytes]);
  await writer.end();
  await reader.end();
  const m = /tps = ([\d.]+)/.exec(report);
  out.tps = m ? Number(m[1]) : Number.NaN;
  return out;
}

async function main() {
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  log(`machine: ${machine}; starting the local stack (file store, one agent)…`);
  const stack = await startStack({
    env: { LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "silent", BACKUP_SCHEDULE_INTERVAL_MS: "1000", AGENT_SAMPLE_INTERVAL_MS: "1000" },
  });
  try {
    const api = await account(stack, "repbench");
    const created = await api.post("/v1/databases", { name: "bench-primary", region: "fsn1", tier: "micro" });
    if (created.status !== 201) throw new Error(`create failed: ${created.status} ${JSON.stringify(created.body)}`);
    const primary = { id: created.body.data.id as string, cs: created.body.data.connection_string as string };
    const password = created.body.data.password as string;
    await waitRunning(api, primary.id);
    await waitFirstBackup(api, primary.id, 600_000);
    log(`${primary.id} running; pgbench -i -s ${SCALE} (server-side generation)…`);
    const init = await timed(() => pgbench(primary.cs, ["-i", "-s", String(SCALE), "-I", "dtGvp", "-q"]));
    const sizes = await connect(primary.cs);
    const dbBytes = Number((await sizes.query("SELECT pg_database_size(current_database()) AS n")).rows[0].n);
    await sizes.end();
    log(`  ${(dbBytes / MB).toFixed(0)} MB in ${secs(init.ms)} s; waiting for the archive to catch up…`);
    await waitRestorableThrough(api, primary.id, new Date(), 900_000);

    log("base backup via the API…");
    const backup = await backupToCompleted(api, primary.id);
    log(`  completed in ${secs(backup.ms)} s, stored ${(backup.sizeBytes / MB).toFixed(0)} MB`);
    log("replica create → running…");
    const replica = await replicaToRunning(api, primary.id, "bench-replica");
    log(`  running in ${secs(replica.ms)} s (${(replica.ms / backup.ms).toFixed(2)} × the base backup)`);
    const slots = await asAgent(stack, primary.id, `SELECT 1 FROM pg_replication_slots WHERE slot_name = '${slotName(replica.rid)}'`);
    if (slots.length !== 1) throw new Error(`no slot ${slotName(replica.rid)} on the primary`);

    log(`lag under pgbench writes at ${LAG_TPS} tps for ${LAG_SECONDS} s…`);
    const lag = await lagUnderLoad(stack, api, primary, { rid: replica.rid, cs: withPassword(replica.cs, password) });
    const v = summary(lag.visibleMs);
    const a = summary(lag.apiBytes);
    const s = summary(lag.statBytes);
    log(
      `  pgbench ${lag.tps.toFixed(0)} tps; visible after p50 ${v.p50.toFixed(0)} ms, p95 ${v.p95.toFixed(0)} ms (${lag.visibleMs.length} rows)`,
    );
    log(`  lag_bytes p50 ${a.p50}, p95 ${a.p95}; pg_stat_replication replay p50 ${s.p50}, p95 ${s.p95}`);

    const head = (await run("git", ["rev-parse", "--short", "HEAD"])).stdout.trim();
    const kb = (n: number) => (n / 1024).toFixed(1);
    await writeSection(
      "Read replicas",
      [
        "Command: `npm run bench:replicas` (test/bench/replicas-bench.ts; BENCH_PGBENCH_SCALE, BENCH_LAG_SECONDS,",
        `BENCH_LAG_TPS). Whole local stack at ${head}, file blob store, one agent (the replica on the primary's agent),`,
        `micro tier. Machine: ${machine}, shared and noisy — compare the ratio, not the absolute numbers.`,
        "",
        `Primary filled by Debian's \`pgbench -i -s ${SCALE} -I dtGvp\` through the published port (TLS): database`,
        `${(dbBytes / MB).toFixed(0)} MB in ${secs(init.ms)} s (pgbench's rows are mostly blank padding, so gzip stores`,
        "the backup small; the replica still writes the whole data directory). Then, in this order on the same data: a base backup from",
        "`POST …/backups` until the list shows it `completed`, and a replica from `POST …/replicas` until it is",
        "`running` (its own seed base backup, fetch and extract on the agent, start, TLS login and streaming), both polled every 250 ms.",
        "",
        "| measurement | seconds | ratio |",
        "|---|---|---|",
        `| base backup via API (stored ${(backup.sizeBytes / MB).toFixed(0)} MB) | ${secs(backup.ms)} | 1 |`,
        `| replica create → running | ${secs(replica.ms)} | ${(replica.ms / backup.ms).toFixed(2)} × the base backup |`,
        "",
        `Replication lag while \`pgbench -c 4 -j 2 -R ${LAG_TPS}\` (TPC-B-like writes) ran for ${LAG_SECONDS} s on the primary`,
        `(${lag.tps.toFixed(0)} tps achieved). Visibility: a row committed on the primary every 500 ms over a kept-open`,
        "TLS session, then the replica polled every 5 ms over another until it shows the row; timed from the",
        "commit's acknowledgement. Bytes: each second, the replica record's `lag_bytes` (what the agent last reported",
        "from pg_stat_replication, sampled each second here) and `pg_current_wal_lsn() − replay_lsn` read on the primary.",
        "",
        "| measurement | samples | p50 | p95 | max |",
        "|---|---|---|---|---|",
        `| committed → visible on the replica (ms) | ${lag.visibleMs.length} | ${v.p50.toFixed(0)} | ${v.p95.toFixed(0)} | ${v.max.toFixed(0)} |`,
        `| \`lag_bytes\` on the record (KiB) | ${lag.apiBytes.length} | ${kb(a.p50)} | ${kb(a.p95)} | ${kb(a.max)} |`,
        `| pg_stat_replication replay lag (KiB) | ${lag.statBytes.length} | ${kb(s.p50)} | ${kb(s.p95)} | ${kb(s.max)} |`,
      ].join("\n"),
    );
    log("written to docs/benchmarks.md");
  } catch (err) {
    const file = join(tmpdir(), `bench-replicas-stack-${Date.now()}.log`);
    await writeFile(file, stack.output());
    log(`the stack's output (LOG_LEVEL=${stack.env.LOG_LEVEL}, BENCH_LOG_LEVEL sets it): ${file}`);
    throw err;
  } finally {
    await stack.destroy();
  }
}

runBench(main);
