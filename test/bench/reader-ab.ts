/**
 * `npx tsx test/bench/reader-ab.ts`: the server log reader of this tree against an earlier one, interleaved call by
 * call on the same file (so a busy machine's spikes hit both alike): the filtered reads `bench:logs` times (the newest
 * 100 ERRORs, a text search of a word not in the scanned 32 MiB) and the newest 100 unfiltered, median of 40 each.
 *
 * The earlier reader is a copy beside this one (it imports ./redact.ts), e.g. before #24's larger reads:
 *   git show 91ae7f6:services/provisioner-agent/src/server-log/reader.ts > services/provisioner-agent/src/server-log/reader-before.ts
 *   BENCH_LOG_MIB=256 npx tsx test/bench/reader-ab.ts; rm services/provisioner-agent/src/server-log/reader-before.ts
 * One jsonlog file of BENCH_LOG_MIB MiB (256) in bench:logs' line format, an ERROR every ~1 MiB.
 */
import { loadavg } from "node:os";
import { mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as after from "../../services/provisioner-agent/src/server-log/reader.ts";

const before: typeof after = await import(process.env.READER_BEFORE ?? "../../services/provisioner-agent/src/server-log/reader-before.ts");
const MIB = Number(process.env.BENCH_LOG_MIB ?? 256);
const T0 = Date.UTC(2026, 10, 1, 0, 0, 0);
const line = (t: number, severity: string, message: string) =>
  `{"timestamp":"${new Date(t).toISOString().replace("T", " ").replace("Z", " UTC")}","user":"dbadmin","dbname":"defaultdb","pid":4242,"remote_host":"127.0.0.1","remote_port":5432,"session_id":"6745a1b2.1092","line_num":1,"ps":"SELECT","session_start":"2026-11-01 00:00:00 UTC","vxid":"3/42","txid":0,"error_severity":"${severity}","message":"${message}","application_name":"app","backend_type":"client backend","query_id":0}\n`;

const root = await mkdtemp(path.join(tmpdir(), "reader-ab-"));
try {
  const fh = await open(path.join(root, "postgresql-20261101-000000.json"), "w");
  let block = "";
  for (let i = 0; i < 3500; i++)
    block += line(T0 + i, "LOG", `duration: ${(i % 97) / 10} ms  statement: SELECT * FROM orders WHERE id = $1`);
  for (let n = 0; n < MIB; n++) await fh.write(block + line(T0 + n * 1000, "ERROR", `relation missing_${n} does not exist`));
  await fh.close();
  console.log(`${MIB} MiB log, load average ${loadavg()[0]!.toFixed(1)} at the start; median ms of 40 calls each, before → after:`);
  const cases: [string, Parameters<typeof after.readLog>[1]][] = [
    ["newest 100 ERRORs (severity=ERROR)", { limit: 100, minSeverity: "ERROR" }],
    ["text search, a word not there (q)", { limit: 10, q: "needle_" }],
    ["newest 100 (the default)", { limit: 100 }],
  ];
  for (const [what, o] of cases) {
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < 40; i++) {
      let s = performance.now();
      await before.readLog(root, o);
      a.push(performance.now() - s);
      s = performance.now();
      await after.readLog(root, o);
      b.push(performance.now() - s);
    }
    const med = (x: number[]) => x.sort((p, q) => p - q)[20]!.toFixed(1);
    console.log(`| ${what} | ${med(a)} → **${med(b)}** |`);
  }
} finally {
  await rm(root, { recursive: true, force: true });
}
