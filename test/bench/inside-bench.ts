/**
 * `npm run bench:inside`: Inside the database through the public API on the real local stack (docs/product.md,
 * Inside the database; issue #24's "Measure"), where `npm run bench:logs` times only the agent's handlers in process.
 *
 * One stack (deploy/local/stack.ts, one agent, the embedded metadata PostgreSQL), one micro database, an organization
 * on the internal plan (no rate limit in the way), every call over HTTP through the gateway with an API key:
 *
 * 1. A configuration change → visible in a new session: `PATCH /v1/databases/{id}/config` of `work_mem` (reload
 *    only) to a value not set before, then fresh connections to the database's published port (TLS, as a customer
 *    connects) running `SHOW work_mem` until it shows the value; from sending the PATCH to the session that saw it.
 *    Next to it, the same fresh connection + SHOW with nothing changed (what any check of a new session costs).
 * 2. A log line → returned by the API: a failing statement naming a fresh table in an open session, then
 *    `GET /v1/databases/{id}/logs?cursor=<the tail's next_cursor>` every 20 ms until the entry is in an answer.
 * 3. Read latency through the gateway: `GET …/logs` (the newest 100), `GET …/logs?q=…`, `GET …/queries`, and as the
 *    baseline `GET /v1/databases/{id}` (the plain read of the same gateway and databases service), interleaved round
 *    by round so that all four see the same load; p50/p99 and each one's p50 over the baseline's.
 *
 * 4. `/logs` on a 1 GiB log (BENCH_LOG_BYTES) through the API: a large database (its log quota holds it) with a file
 *    written into its log directory (big-log.ts, as bench:logs), the newest 100, the newest ERRORs, a text search,
 *    a tail's poll; p50/p99 of BENCH_ITERATIONS calls each.
 *
 * With BENCH_TRACE=1 only 1. runs, with the stack tracing to an OTLP receiver in this process
 * (otlp-collector.ts) and each PATCH sent in a trace of its own: it prints where a change's time goes, span by
 * span (gateway, databases service, agent), and writes nothing to docs/benchmarks.md (tracing costs time too).
 */
import { chown, readdir, stat } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import path from "node:path";
import { waitRunning } from "../support/backups.ts";
import { connectCustomer } from "../support/pgclient.ts";
import { account } from "../support/replicas.ts";
import { startStack } from "../support/stack.ts";
import { breakdown, type Collector, newTraceparent, startCollector } from "../support/otlp-collector.ts";
import { bigLog } from "./big-log.ts";
import { benchLog, runBench, writeSection } from "./report.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const TRACE = process.env.BENCH_TRACE === "1";
const LOG_BYTES = Number(process.env.BENCH_LOG_BYTES ?? 1024 ** 3);

/** Database `id`'s server log directory, under whichever agent of the stack runs it. */
async function serverLogDir(dataDir: string, id: string): Promise<string> {
  for (const agent of await readdir(path.join(dataDir, "agents"))) {
    const dir = path.join(dataDir, "agents", agent, "server-logs", id);
    if (
      await stat(dir).then(
        () => true,
        () => false,
      )
    )
      return dir;
  }
  throw new Error(`no server log directory of ${id}`);
}

function percentiles(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)]!;
  return { p50: at(50), p95: at(95), p99: at(99), max: s[s.length - 1]! };
}
const ms = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

runBench(async () => {
  const load = loadavg()[0]!.toFixed(1);
  benchLog("starting the local stack (one agent)");
  const collector: Collector | undefined = TRACE ? await startCollector() : undefined;
  const stack = await startStack({ agents: "fsn1", env: { LOG_LEVEL: "silent", AGENT_CAPACITY: "4", ...collector?.env } });
  try {
    const api = await account(stack, "inside");
    const created = await api.post("/v1/databases", { name: "inside-bench", region: "fsn1", tier: "micro" });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    const db: { id: string; connection_string: string } = created.body.data;
    await waitRunning(api, db.id, "running", 180_000);
    const key: string = (await api.post("/v1/organization/api-keys", { name: "bench" })).body.data.secret;
    // Plain HTTP through the gateway (keep-alive), timed around the request alone.
    const call = async (method: string, path: string, body?: unknown, traceparent?: string) => {
      const res = await fetch(stack.baseUrl + path, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body !== undefined && { "content-type": "application/json" }),
          ...(traceparent !== undefined && { traceparent }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text).data;
    };
    const base = `/v1/databases/${db.id}`;
    const show = async () => {
      const c = await connectCustomer(db.connection_string);
      try {
        return (await c.query("SHOW work_mem")).rows[0].work_mem as string;
      } finally {
        await c.end();
      }
    };

    // 1. Configuration change → visible in a new session.
    benchLog(`${ROUNDS} work_mem changes → visible in a new session`);
    const patchMs: number[] = [];
    const visibleMs: number[] = [];
    const sessionMs: number[] = [];
    let firstSession = 0;
    const traceIds: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const t = performance.now();
      await show();
      sessionMs.push(performance.now() - t);
      const value = `${8 + i}MB`;
      const traced = TRACE ? newTraceparent() : undefined;
      if (traced) traceIds.push(traced.traceId);
      const t0 = performance.now();
      await call("PATCH", `${base}/config`, { parameters: { work_mem: value } }, traced?.traceparent);
      patchMs.push(performance.now() - t0);
      for (let tries = 1; ; tries++) {
        if ((await show()) === value) {
          if (tries === 1) firstSession++;
          break;
        }
        if (performance.now() - t0 > 30_000) throw new Error(`work_mem ${value} not visible within 30 s`);
      }
      visibleMs.push(performance.now() - t0);
    }
    const patch = percentiles(patchMs);
    const visible = percentiles(visibleMs);
    const session = percentiles(sessionMs);
    benchLog(
      `PATCH answered p50 ${ms(patch.p50)} ms, max ${ms(patch.max)} ms; visible p50 ${ms(visible.p50)} ms, max ${ms(visible.max)} ms`,
    );
    benchLog(
      `a new session + SHOW alone: p50 ${ms(session.p50)} ms, max ${ms(session.max)} ms; first session saw it ${firstSession}/${ROUNDS}`,
    );

    if (collector) {
      // Each process exports in batches of its own: wait until every trace has the agent's work and the request's end.
      const complete = (id: string) => {
        const t = collector.spans.filter((s) => s.traceId === id);
        return t.some((s) => s.name === "reconcile") && t.some((s) => s.service === "gateway" && s.kind === 2);
      };
      for (const deadline = performance.now() + 30_000; !traceIds.every(complete) && performance.now() < deadline; ) await sleep(200);
      await sleep(1000);
      const table = breakdown(collector.spans, traceIds);
      process.stdout.write(
        `\n${ROUNDS} traced PATCHes (${traceIds.filter(complete).length} complete traces); load average ${load} at the start:\n${table}\n`,
      );
      return;
    }

    // 2. A log line → returned by the API.
    benchLog(`${ROUNDS} log lines written → returned by GET …/logs`);
    const lineMs: number[] = [];
    const polls: number[] = [];
    const c = await connectCustomer(db.connection_string);
    try {
      for (let i = 0; i < ROUNDS; i++) {
        let cursor: string = (await call("GET", `${base}/logs?limit=1`)).next_cursor;
        const table = `bench_missing_${i}_${Date.now()}`;
        const t0 = performance.now();
        await c.query(`SELECT * FROM ${table}`).catch(() => {});
        for (let n = 1; ; n++) {
          const page = await call("GET", `${base}/logs?limit=1000&cursor=${cursor}`);
          if (page.entries.some((e: { message: string }) => e.message.includes(table))) {
            polls.push(n);
            break;
          }
          if (performance.now() - t0 > 30_000) throw new Error(`the entry of ${table} was not returned within 30 s`);
          cursor = page.next_cursor;
          await sleep(20);
        }
        lineMs.push(performance.now() - t0);
      }
      // Something for /queries to rank.
      for (let i = 0; i < 50; i++) await c.query("SELECT count(*) FROM pg_class WHERE relname = $1", [`t${i}`]);
    } finally {
      await c.end();
    }
    const line = percentiles(lineMs);
    benchLog(`written → returned p50 ${ms(line.p50)} ms, max ${ms(line.max)} ms (polls p50 ${percentiles(polls).p50})`);

    // 3. Read latency through the gateway, the four reads interleaved.
    const reads: [string, string][] = [
      ["`GET /v1/databases/{id}` (baseline)", base],
      ["`GET …/logs` (the newest 100)", `${base}/logs`],
      ["`GET …/logs?q=…` (a text search)", `${base}/logs?q=bench_missing_1_`],
      ["`GET …/queries`", `${base}/queries`],
    ];
    benchLog(`${ITERATIONS} rounds of ${reads.map(([w]) => w).join(", ")}`);
    const times = reads.map(() => [] as number[]);
    for (const [, path] of reads) await call("GET", path);
    for (let i = 0; i < ITERATIONS; i++)
      for (const [j, [, path]] of reads.entries()) {
        const t = performance.now();
        await call("GET", path);
        times[j]!.push(performance.now() - t);
      }
    const stats = times.map(percentiles);
    const baseline = stats[0]!;
    const rows = reads.map(([what], j) => {
      const p = stats[j]!;
      benchLog(`${what}: p50 ${ms(p.p50)} ms, p99 ${ms(p.p99)} ms, max ${ms(p.max)} ms`);
      return `| ${what} | ${ms(p.p50)} | ${ms(p.p95)} | **${ms(p.p99)}** | ${ms(p.max)} | ${(p.p50 / baseline.p50).toFixed(2)} |`;
    });
    const logSize = (await call("GET", `${base}/logs?limit=1000`)).entries.length;

    // 4. `/logs` on a 1 GiB log through the API: a second database of a tier whose log quota holds it (large: 2 GiB;
    // micro's 256 MiB would prune it), a file of LOG_BYTES in its log directory as the server's own (its uid, 0600),
    // named as the newest file, then the same reads as bench:logs through the gateway.
    benchLog(`a large database with a ${(LOG_BYTES / 1024 ** 3).toFixed(2)} GiB log file`);
    const big = await api.post("/v1/databases", { name: "inside-bench-logs", region: "fsn1", tier: "large" });
    if (big.status !== 201) throw new Error(`create large: ${big.status} ${JSON.stringify(big.body)}`);
    await waitRunning(api, big.body.data.id, "running", 180_000);
    const bigBase = `/v1/databases/${big.body.data.id}`;
    const logDir = await serverLogDir(stack.dataDir, big.body.data.id);
    const file = path.join(logDir, await bigLog(logDir, LOG_BYTES, new Date(Date.now() + 3_600_000)));
    const owner = await stat(logDir);
    await chown(file, owner.uid, owner.gid);
    const bigSize = (await stat(file)).size;
    const first = await call("GET", `${bigBase}/logs`);
    const bigReads: [string, string][] = [
      ["newest 100 (the default)", `${bigBase}/logs`],
      ["newest 100 ERRORs (`severity=ERROR`)", `${bigBase}/logs?severity=ERROR`],
      ["text search, 10 of a word every ~200 MiB (`q`)", `${bigBase}/logs?q=needle_&limit=10`],
      ["a tail's poll at the end (`cursor=next_cursor`, nothing new)", `${bigBase}/logs?cursor=${first.next_cursor}`],
    ];
    const bigRows: string[] = [];
    for (const [what, path] of bigReads) {
      await call("GET", path);
      const t: number[] = [];
      for (let i = 0; i < ITERATIONS; i++) {
        const s = performance.now();
        await call("GET", path);
        t.push(performance.now() - s);
      }
      const p = percentiles(t);
      benchLog(`1 GiB log, ${what}: p50 ${ms(p.p50)} ms, p99 ${ms(p.p99)} ms, max ${ms(p.max)} ms`);
      bigRows.push(`| ${what} | ${ms(p.p50)} | ${ms(p.p95)} | **${ms(p.p99)}** | ${ms(p.max)} |`);
    }

    const body = `${cpus().length} cores, load average ${load} at the start. Through the public API on the local stack
(\`npm start\`'s runner, one agent, embedded metadata PostgreSQL), one micro database of PostgreSQL 17, every call
HTTP through the gateway with an API key.

A configuration change → visible in a new session (\`PATCH …/config\` of \`work_mem\` to a new value, then fresh
TLS connections to the database's port running \`SHOW work_mem\` until it shows it), ${ROUNDS} changes:
**p50 ${ms(visible.p50)} ms, max ${ms(visible.max)} ms** from sending the PATCH; the PATCH itself answered in p50
${ms(patch.p50)} ms (max ${ms(patch.max)} ms), and the first new session after the answer already showed the value
${firstSession} of ${ROUNDS} times. A new session + \`SHOW\` with nothing changed costs p50 ${ms(session.p50)} ms (max
${ms(session.max)} ms) on its own.

A log line → returned by the API (a failing statement in an open session, then \`GET …/logs?cursor=<next_cursor>\`
every 20 ms until its entry is in an answer), ${ROUNDS} lines: **p50 ${ms(line.p50)} ms, max ${ms(line.max)} ms**
(p50 ${percentiles(polls).p50} polls).

Reads through the gateway, ${ITERATIONS} rounds of the four interleaved (the log then held ~${logSize} entries;
\`/queries\` ranks pg_stat_statements):

| read | p50 ms | p95 ms | p99 ms | max ms | p50 / baseline p50 |
|---|---|---|---|---|---|
${rows.join("\n")}

\`/logs\` on a ${(bigSize / 1024 ** 3).toFixed(2)} GiB log through the API (a large database, whose 2 GiB log quota holds it;
one jsonlog file of ~300-byte lines with an ERROR every ~1 MiB in its log directory as the newest file, the server's
own), ${ITERATIONS} calls each, one after another:

| read | p50 ms | p95 ms | p99 ms | max ms |
|---|---|---|---|---|
${bigRows.join("\n")}`;
    process.stdout.write(`\n${body}\n`);
    await writeSection("Inside the database through the API (npm run bench:inside)", body);
  } finally {
    await stack.destroy();
    collector?.close();
  }
});
