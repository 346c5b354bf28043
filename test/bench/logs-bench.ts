/**
 * `npm run bench:logs`: the server's log (docs/product.md, Inside the database).
 *
 * 1. A log line written → returned: a real PostgreSQL server (tier micro) run by the agent's local runtime, its
 *    InstanceAdminService handlers in process (what the databases service calls). Each round takes the tail's
 *    cursor, runs a failing statement naming a fresh table, and polls ReadLogs with the cursor every 20 ms until the
 *    entry is there: from the statement's error to the entry in an answer.
 * 2. `/logs` on a 1 GiB log file (BENCH_LOG_BYTES): one jsonlog file of ~300-byte lines with an ERROR every ~1 MiB,
 *    read through the same handlers: the newest 100 (the default), the newest ERRORs, a text search of a rare word,
 *    a page back from a cursor in the middle, and a tail's poll at the end; p50/p99/max of BENCH_ITERATIONS each.
 */
import { cpus, loadavg, tmpdir } from "node:os";
import { mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import path from "node:path";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { createLogger } from "@dbaas/kit";
import { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { instanceAdmin } from "../../services/provisioner-agent/src/handlers/instance-admin.ts";
import type { InstanceRuntime } from "../../services/provisioner-agent/src/runtime.ts";
import { connect, query, startHost, startInstance } from "../../services/provisioner-agent/test/support/fixture.ts";
import { bigLog } from "./big-log.ts";
import { benchLog, runBench, writeSection } from "./report.ts";

const LOG_BYTES = Number(process.env.BENCH_LOG_BYTES ?? 1024 ** 3);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);

function percentiles(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)]!;
  return { p50: at(50), p99: at(99), max: s[s.length - 1]! };
}
const ms = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));

const admin = (runtime: Pick<InstanceRuntime, "serverLog">) =>
  createClient(
    InstanceAdminService,
    createRouterTransport((r) =>
      r.service(InstanceAdminService, instanceAdmin({ runtime: runtime as InstanceRuntime, log: createLogger("bench") })),
    ),
  );

async function writtenToReturned(): Promise<number[]> {
  const host = await startHost("logsbench");
  try {
    const inst = await startInstance(host, "logsbench1");
    const a = admin(host.runtime);
    const read = (cursor: string, q = "") => a.readLogs({ databaseId: inst.id, limit: 100, minSeverity: "", q, cursor });
    // The collector's first file exists once the server is up.
    await query(inst.port, inst.password, "SELECT 1");
    const out: number[] = [];
    // One open session: the time is the statement's, not a connection's.
    const c = await connect(inst.port, inst.password);
    for (let i = 0; i < ROUNDS; i++) {
      const tail = await read("");
      const table = `bench_missing_${i}_${Date.now()}`;
      const t0 = performance.now();
      await c.query(`SELECT * FROM ${table}`).catch(() => {});
      for (let cursor = tail.nextCursor; ; ) {
        const page = await read(cursor);
        if (page.entries.some((e) => e.message.includes(table))) break;
        if (performance.now() - t0 > 30_000) throw new Error(`the entry of ${table} was not returned within 30 s`);
        cursor = page.nextCursor;
        await new Promise((r) => setTimeout(r, 20));
      }
      out.push(performance.now() - t0);
    }
    await c.end();
    return out;
  } finally {
    await host.close();
  }
}

async function onLargeFile() {
  const root = await mkdtemp(path.join(tmpdir(), "logs-bench-"));
  try {
    const dir = path.join(root, "logs");
    await mkdir(dir);
    benchLog(`writing a ${(LOG_BYTES / 1024 ** 3).toFixed(2)} GiB log file`);
    const file = await bigLog(dir, LOG_BYTES);
    const size = (await stat(path.join(dir, file))).size;
    const uid = process.getuid!();
    const a = admin({ serverLog: async () => ({ dir, uid, quotaBytes: 4 * 1024 ** 3 }) });
    const read = (o: { q?: string; minSeverity?: string; cursor?: string; limit?: number }) =>
      a.readLogs({ databaseId: "bench", limit: o.limit ?? 100, minSeverity: o.minSeverity ?? "", q: o.q ?? "", cursor: o.cursor ?? "" });
    const first = await read({});
    // A cursor about in the middle: page back 1000 at a time from the end until past half the file.
    let middle = first.prevCursor;
    for (let i = 0; i < 50; i++) {
      const p = await read({ cursor: middle, limit: 1000 });
      middle = p.prevCursor;
      const off = Number(Buffer.from(middle, "base64url").toString().split(":")[2]);
      if (off < size / 2) break;
    }
    const cases: [string, () => Promise<unknown>][] = [
      ["newest 100 (the default)", () => read({})],
      ["newest 100 ERRORs (`severity=ERROR`)", () => read({ minSeverity: "ERROR" })],
      ["text search, 10 of a word every ~200 MiB (`q`)", () => read({ q: "needle_", limit: 10 })],
      ["a page of 100 back from a cursor mid-file", () => read({ cursor: middle })],
      ["a tail's poll at the end (`cursor=next_cursor`, nothing new)", () => read({ cursor: first.nextCursor })],
    ];
    const rows: string[] = [];
    for (const [what, fn] of cases) {
      await fn();
      const t: number[] = [];
      const rss: number[] = [];
      for (let i = 0; i < ITERATIONS; i++) {
        const s = performance.now();
        await fn();
        t.push(performance.now() - s);
        rss.push(process.memoryUsage().rss);
      }
      const p = percentiles(t);
      benchLog(`${what}: p50 ${ms(p.p50)} ms, p99 ${ms(p.p99)} ms, max ${ms(p.max)} ms`);
      rows.push(`| ${what} | ${ms(p.p50)} | **${ms(p.p99)}** | ${ms(p.max)} | ${(Math.max(...rss) / 1024 ** 2).toFixed(0)} |`);
    }
    return { size, rows };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

runBench(async () => {
  const load = loadavg()[0]!.toFixed(1);
  benchLog(`${ROUNDS} rounds of a log line written → returned`);
  const lat = percentiles(await writtenToReturned());
  benchLog(`written → returned: p50 ${ms(lat.p50)} ms, max ${ms(lat.max)} ms`);
  const big = await onLargeFile();
  const body = `${cpus().length} cores, load average ${load} at the start. Through the agent's InstanceAdminService handlers in process
(services/provisioner-agent/src/server-log/reader.ts: chunks of 64 KiB, at most 32 MiB scanned per call).

A log line written → returned (a failing statement in an open session on a real PostgreSQL 17 server, micro tier,
from sending it to its entry in a ReadLogs answer, the tail's cursor polled every 20 ms), ${ROUNDS} rounds: **p50 ${ms(lat.p50)} ms, max ${ms(lat.max)} ms**.

\`/logs\` on one ${(big.size / 1024 ** 3).toFixed(2)} GiB jsonlog file (~300-byte lines, an ERROR every ~1 MiB), ${ITERATIONS} calls each:

| read | p50 ms | p99 ms | max ms | RSS max MiB |
|---|---|---|---|---|
${big.rows.join("\n")}`;
  process.stdout.write(`\n${body}\n`);
  await writeSection("Server logs (npm run bench:logs)", body);
});
