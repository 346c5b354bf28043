/**
 * `npm run bench:ha`: high availability on the real local stack — three agents for fsn1 (three simulated hosts,
 * 127.0.0.2-4) and a real BIND, as test/e2e/high-availability.test.ts. One database with one standby:
 *
 * - failover time, BENCH_HA_RUNS (10) times in synchronous mode, then as many in asynchronous mode: a client
 *   writes without pause through the database's name (resolved at each connect); the primary's host is lost (its
 *   agent's restart held, the agent and the postmaster killed with SIGKILL); the time from the loss to the first
 *   write acknowledged through the same name by the new primary, and how many acknowledged writes are missing;
 *   the host is brought back (its old primary discarded) and the replacement standby awaited before the next run;
 * - planned switchover, BENCH_HA_SWITCHOVERS (5) times: the longest pause between acknowledged writes;
 * - pgbench (TPC-B-like, `-c 4 -j 2 -T 20`) through the published port with a synchronous standby, an
 *   asynchronous one and none, one after the other in the same run: the price of zero loss.
 *
 * Prints the numbers and writes them to docs/benchmarks.md.
 */
import { execFile } from "node:child_process";
import { cpus, totalmem } from "node:os";
import { promisify } from "node:util";
import pg from "pg";
import { poll, type Api } from "../support/backups.ts";
import { agentAt, bringBackHost, HOST_ADDRESS, loseHost, startWriter, waitMembersRunning } from "../support/ha.ts";
import { namedMissing, startNamed, type Named } from "../support/named.ts";
import { createTestDatabase } from "../support/pg.ts";
import { account } from "../support/replicas.ts";
import { startStack } from "../support/stack.ts";
import { runBench, summary, writeSection, benchLog as log, secs } from "./report.ts";

const RUNS = Number(process.env.BENCH_HA_RUNS ?? 10);
const SWITCHOVERS = Number(process.env.BENCH_HA_SWITCHOVERS ?? 5);
const PGBENCH_SECONDS = Number(process.env.BENCH_HA_PGBENCH_SECONDS ?? 20);
const ZONE = "db.test";
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Db {
  id: string;
  host: string;
  port: number;
  password: string;
}

async function sql(named: Named, db: Db, ca: string, text: string): Promise<Record<string, unknown>[]> {
  const [address] = await named.dig(db.host);
  const c = new pg.Client({
    host: address,
    port: db.port,
    user: "dbadmin",
    password: db.password,
    database: "defaultdb",
    ssl: { ca, servername: db.host },
  });
  await c.connect();
  try {
    return (await c.query(text)).rows;
  } finally {
    await c.end();
  }
}

const failoverOps = async (api: Api, id: string) =>
  ((await api.get(`/v1/databases/${id}/operations?per_page=100`)).body.data.operations as Array<Record<string, string>>).filter(
    (o) => o.type === "failover",
  );

/** One lost host under writes: seconds to the first write acknowledged by the new primary, acknowledged writes lost. */
async function failoverOnce(api: Api, named: Named, stack: Awaited<ReturnType<typeof startStack>>, db: Db, ca: string, table: string) {
  await waitMembersRunning(api, db.id, 1, 600_000);
  await sql(named, db, ca, `CREATE TABLE ${table} (id int PRIMARY KEY)`);
  const [oldAddress] = await named.dig(db.host);
  const agent = agentAt(oldAddress!)!;
  const writer = startWriter({ named, host: db.host, port: db.port, password: db.password, ca, table });
  await poll(async () => writer.acknowledged().length >= 30, 60_000, "writes flowing");
  const lostAt = await loseHost(stack, agent, db.id);
  const resumed = await poll(async () => writer.firstAckAfter(lostAt, oldAddress), 300_000, "a write on the new primary");
  await sleep(1000);
  await writer.stop();
  const present = new Set((await sql(named, db, ca, `SELECT id FROM ${table}`)).map((r) => r.id as number));
  const lost = writer.acknowledged().filter((id) => !present.has(id)).length;
  await bringBackHost(stack, agent);
  // The returning host discards its old primary before the next run may place a standby there.
  await poll(async () => /was discarded at/.test((await failoverOps(api, db.id))[0]?.reason ?? ""), 300_000, "old primary discarded");
  return { ms: resumed.at - lostAt, lost, acknowledged: writer.acknowledged().length };
}

/** One planned switchover under writes: the longest pause between acknowledged writes, acknowledged writes lost. */
async function switchoverOnce(api: Api, named: Named, db: Db, ca: string, table: string) {
  await waitMembersRunning(api, db.id, 1, 600_000);
  await sql(named, db, ca, `CREATE TABLE ${table} (id int PRIMARY KEY)`);
  const [oldAddress] = await named.dig(db.host);
  const writer = startWriter({ named, host: db.host, port: db.port, password: db.password, ca, table });
  await poll(async () => writer.acknowledged().length >= 30, 60_000, "writes flowing");
  const askedAt = Date.now();
  const res = await api.post(`/v1/databases/${db.id}/failover`, {});
  if (res.status !== 202) throw new Error(`switchover: ${res.status} ${JSON.stringify(res.body)}`);
  const resumed = await poll(async () => writer.firstAckAfter(askedAt, oldAddress), 300_000, "a write on the new primary");
  await sleep(1000);
  await writer.stop();
  const present = new Set((await sql(named, db, ca, `SELECT id FROM ${table}`)).map((r) => r.id as number));
  return { pauseMs: writer.longestGap(askedAt, resumed.at), lost: writer.acknowledged().filter((id) => !present.has(id)).length };
}

/** pgbench through the published port (TLS) at the name's address: tps and average latency. */
async function pgbench(named: Named, db: Db, args: string[]): Promise<{ tps: number; latencyMs: number }> {
  const [address] = await named.dig(db.host);
  const { stdout, stderr } = await run("pgbench", ["-h", address!, "-p", String(db.port), "-U", "dbadmin", ...args, "defaultdb"], {
    env: { ...process.env, PGPASSWORD: db.password, PGSSLMODE: "require" },
    maxBuffer: 1 << 26,
  });
  const out = stdout + stderr;
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const latencyMs = Number(/latency average = ([\d.]+) ms/.exec(out)?.[1]);
  return { tps, latencyMs };
}

async function setHa(api: Api, id: string, standbys: number, synchronous: boolean) {
  const res = await api.put(`/v1/databases/${id}/high-availability`, { standbys, synchronous });
  if (res.status !== 200) throw new Error(`PUT high-availability: ${res.status} ${JSON.stringify(res.body)}`);
}

runBench(async () => {
  const missing = namedMissing();
  if (missing) throw new Error(missing);
  const named = await startNamed(ZONE);
  const meta = await createTestDatabase("bench_ha");
  log("starting the local stack with three agents for fsn1…");
  const stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1;fsn1;fsn1",
    readyTimeoutMs: 900_000,
    env: {
      DATABASE_DOMAIN: ZONE,
      DNS_PROVIDER: "rfc2136",
      DNS_SERVER: named.server,
      DNS_ZONE: ZONE,
      DNS_TSIG_KEY: named.tsigKey,
      BACKUP_SCHEDULE_INTERVAL_MS: "1000",
      BACKUP_ARCHIVE_TIMEOUT_S: "5",
      LOG_LEVEL: "warn",
    },
  });
  try {
    const api = await account(stack, "bench-ha");
    const created = await api.post("/v1/databases", { name: "bench-ha", region: "fsn1", tier: "small", standbys: 1, synchronous: true });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    const db: Db = created.body.data;
    await waitMembersRunning(api, db.id, 1, 600_000);
    const ca = (await api.get(`/v1/databases/${db.id}/ca-certificate`)).body as string;

    const results: Record<"synchronous" | "asynchronous", { ms: number[]; lost: number[]; acknowledged: number }> = {
      synchronous: { ms: [], lost: [], acknowledged: 0 },
      asynchronous: { ms: [], lost: [], acknowledged: 0 },
    };
    let table = 0;
    for (const mode of ["synchronous", "asynchronous"] as const) {
      await setHa(api, db.id, 1, mode === "synchronous");
      for (let i = 1; i <= RUNS; i++) {
        const r = await failoverOnce(api, named, stack, db, ca, `writes_${++table}`);
        results[mode].ms.push(r.ms);
        results[mode].lost.push(r.lost);
        results[mode].acknowledged += r.acknowledged;
        log(`${mode} failover ${i}/${RUNS}: writable again after ${secs(r.ms)} s; ${r.lost} acknowledged write(s) lost`);
      }
    }

    const pauses: number[] = [];
    let switchLost = 0;
    await setHa(api, db.id, 1, true);
    for (let i = 1; i <= SWITCHOVERS; i++) {
      const r = await switchoverOnce(api, named, db, ca, `writes_${++table}`);
      pauses.push(r.pauseMs);
      switchLost += r.lost;
      log(`switchover ${i}/${SWITCHOVERS}: writes paused ${secs(r.pauseMs)} s at most; ${r.lost} lost`);
    }

    log(`pgbench -i -s 10, then ${PGBENCH_SECONDS} s of TPC-B-like writes with a synchronous standby, an asynchronous one, none…`);
    await waitMembersRunning(api, db.id, 1, 600_000);
    await pgbench(named, db, ["-i", "-s", "10", "-q"]);
    const bench: Record<string, { tps: number; latencyMs: number }> = {};
    for (const [label, standbys, synchronous] of [
      ["synchronous standby", 1, true],
      ["asynchronous standby", 1, false],
      ["no standby", 0, false],
    ] as const) {
      await setHa(api, db.id, standbys, synchronous);
      if (standbys > 0) {
        await waitMembersRunning(api, db.id, 1, 600_000);
        await poll(
          async () => {
            const row = (await sql(named, db, ca, "SELECT current_setting('synchronous_standby_names') AS s"))[0]!;
            return synchronous ? String(row.s).startsWith("ANY 1") : row.s === "";
          },
          60_000,
          `${label} in effect`,
        );
      }
      bench[label] = await pgbench(named, db, ["-n", "-c", "4", "-j", "2", "-T", String(PGBENCH_SECONDS)]);
      log(`${label}: ${bench[label]!.tps.toFixed(0)} tps, latency ${bench[label]!.latencyMs.toFixed(2)} ms`);
    }

    const s = (ms: number[]) => {
      const x = summary(ms);
      return `p50 ${secs(x.p50)} s, p95 ${secs(x.p95)} s, max ${secs(x.max)} s`;
    };
    const p = summary(pauses);
    const body = [
      `Three agents for fsn1 on one machine (${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GB; three simulated hosts,`,
      "127.0.0.2-4), a real BIND, HA_LEASE_SECONDS 10, HA_LEASE_MARGIN_SECONDS 2, AGENT_LEASE_RENEW_MS 2000, agents'",
      "reports every second (the local stack's). One `small` database with one standby; a client writes one row per",
      "statement without pause through the database's name (resolved on BIND at each connect, verify-full against the",
      "region's CA bundle). A run: the primary's host is lost (its agent's restart held, the agent and the postmaster",
      "killed with SIGKILL); failover time = from the loss to the first write acknowledged through the same name by",
      "the new primary; then the host comes back, discards its old primary, and the replacement standby is awaited.",
      "",
      "| | runs | failover time (loss → first write via DNS) | acknowledged writes lost |",
      "|---|---|---|---|",
      `| synchronous | ${results.synchronous.ms.length} | ${s(results.synchronous.ms)} | ${results.synchronous.lost.reduce((a, b) => a + b, 0)} of ${results.synchronous.acknowledged} |`,
      `| asynchronous | ${results.asynchronous.ms.length} | ${s(results.asynchronous.ms)} | ${results.asynchronous.lost.reduce((a, b) => a + b, 0)} of ${results.asynchronous.acknowledged} |`,
      "",
      `Planned switchover (POST …/failover, synchronous), ${SWITCHOVERS} runs under the same writes: writes paused p50`,
      `${secs(p.p50)} s, max ${secs(p.max)} s (the longest gap between acknowledged writes); ${switchLost} acknowledged writes lost.`,
      "",
      `pgbench \`-c 4 -j 2 -T ${PGBENCH_SECONDS}\` (TPC-B-like, scale 10) through the published port (TLS), same run:`,
      "",
      "| | tps | latency average |",
      "|---|---|---|",
      ...Object.entries(bench).map(([label, b]) => `| ${label} | ${b.tps.toFixed(0)} | ${b.latencyMs.toFixed(2)} ms |`),
      "",
      "Where the failover time goes: the lease (10 s after the lost agent's last renewal, which came up to 2 s before the",
      "loss) plus the margin (2 s), the standby's next report with its final WAL position (≤ 1 s), the supervisor's pass",
      "(≤ 1 s), the standby's promotion, stop and start as the database (the adoption), and the client's reconnect.",
    ].join("\n");
    log(`\n${body}`);
    await writeSection("High availability (npm run bench:ha)", body);
  } finally {
    for (const agent of Object.keys(HOST_ADDRESS)) await bringBackHost(stack, agent).catch(() => {});
    await stack.destroy();
    await meta.drop();
    await named.stop();
  }
});
