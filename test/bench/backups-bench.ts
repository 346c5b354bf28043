/**
 * `npm run bench:backups`: backups and restore on the real local stack (file
 * store). A base backup of a ~1 GB database beside `tar` of the same data
 * directory, its restore beside `cp -a`, the RPO (now − latest_restore_time)
 * under a steady write load and idle, and create→running with WAL archiving
 * on beside the commit before the backups work, in the same run. Prints the
 * numbers and writes them to docs/benchmarks.md.
 *
 * `BENCH_ONLY=encryption npm run bench:backups` measures instead what
 * encryption at rest costs: one instance on a test host, filled to
 * BENCH_ENCRYPTION_MB, base backups (BASE_BACKUP → tar filter → gzip → store)
 * and the restore's fetch (store → gunzip → tar -x) into a plain and an
 * encrypted file store, alternately, BENCH_ROUNDS times each: same data,
 * same run. Written to its own section of docs/benchmarks.md.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
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
import { startStack, type Stack } from "../support/stack.ts";
import { takeBaseBackup } from "../../services/provisioner-agent/src/backups/base-backup.ts";
import type { BlobStore } from "../../services/provisioner-agent/src/backups/blob-store.ts";
import { openBlobStore } from "../../services/provisioner-agent/src/backups/open-store.ts";
import { baseTarKey } from "../../services/provisioner-agent/src/backups/layout.ts";
import { extractTarGz } from "../../services/provisioner-agent/src/backups/tar.ts";
import { startHost, startInstance } from "../../services/provisioner-agent/test/support/fixture.ts";
import { account } from "../support/replicas.ts";
import { withBaselineTree } from "./baseline-tree.ts";
import { fmt, summary, writeSection, runBench, benchLog as log, connectCustomer as connect, secs } from "./report.ts";

const GB = Number(process.env.BENCH_BACKUP_GB ?? 1);
const RPO_SECONDS = Number(process.env.BENCH_RPO_SECONDS ?? 120);
const COUNT = Number(process.env.BENCH_COUNT ?? 10);
const BASELINE_REF = process.env.BENCH_BASELINE_REF ?? "87782e6";
const MB = 2 ** 20;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

async function duBytes(path: string): Promise<number> {
  return Number((await run("du", ["-sb", path])).stdout.split("\t")[0]);
}

/** GNU tar exits 1 when a file changed while it read it: expected on a running database's directory. */
async function tar(args: string[]): Promise<void> {
  await run("tar", args).catch((err: { code?: number }) => {
    if (err.code !== 1) throw err;
  });
}

/** The instance's data directory, under whichever agent holds it. */
async function instanceDir(stack: Stack, id: string): Promise<string> {
  for (const agent of await readdir(join(stack.dataDir, "agents"))) {
    const dir = join(stack.dataDir, "agents", agent, "instances", id);
    if (existsSync(dir)) return dir;
  }
  throw new Error(`no instance directory for ${id}`);
}

async function createRunning(api: Api, name: string): Promise<{ id: string; cs: string }> {
  const res = await api.post("/v1/databases", { name, region: "fsn1", tier: "micro" });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  await waitRunning(api, res.body.data.id);
  return { id: res.body.data.id, cs: res.body.data.connection_string };
}

/** Rows of 512 random bytes (16 SHA-256 of random text): gzip gains little, as on real data that is already dense. */
async function fill(cs: string, bytes: number): Promise<{ ms: number; rows: number; tableBytes: number }> {
  const client = await connect(cs);
  try {
    await client.query("CREATE TABLE fill (id bigint NOT NULL, payload bytea NOT NULL)");
    const payload = Array.from({ length: 16 }, () => "sha256(random()::text::bytea)").join(" || ");
    const batch = 100_000;
    let rows = 0;
    let tableBytes = 0;
    const t0 = performance.now();
    while (tableBytes < bytes) {
      await client.query(`INSERT INTO fill SELECT g, ${payload} FROM generate_series($1::bigint, $2::bigint) g`, [rows + 1, rows + batch]);
      rows += batch;
      tableBytes = Number((await client.query("SELECT pg_total_relation_size('fill') AS n")).rows[0].n);
      log(`  fill: ${rows} rows, ${(tableBytes / MB).toFixed(0)} MB, ${secs(performance.now() - t0)} s`);
    }
    return { ms: performance.now() - t0, rows, tableBytes };
  } finally {
    await client.end();
  }
}

/** POST …/backups, then polls the list until that backup is completed. */
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

async function baseBackupAndRestore(stack: Stack, api: Api, scratch: string) {
  const src = await createRunning(api, "bench-1gb");
  await waitFirstBackup(api, src.id, 600_000);
  log(`${src.id} running, first backup done; filling to ${GB} GB…`);
  const filled = await fill(src.cs, GB * 2 ** 30);
  const fillEnd = new Date();
  log(
    `filled: ${filled.rows} rows, ${(filled.tableBytes / MB).toFixed(0)} MB in ${secs(filled.ms)} s; waiting for the archive to catch up…`,
  );
  const catchUp = await timed(() => waitRestorableThrough(api, src.id, fillEnd, 900_000));
  log(`  restorable through the fill's end after ${secs(catchUp.ms)} s`);

  const dir = await instanceDir(stack, src.id);
  const dataBytes = await duBytes(dir);
  const walBytes = await duBytes(join(dir, "pg_wal"));
  log(`data directory ${(dataBytes / MB).toFixed(0)} MB (pg_wal ${(walBytes / MB).toFixed(0)} MB); base backup via the API…`);
  const backup = await backupToCompleted(api, src.id);
  log(`  backup completed in ${secs(backup.ms)} s, stored ${(backup.sizeBytes / MB).toFixed(0)} MB`);
  const tarFile = join(scratch, "data.tar");
  const tarPlain = await timed(() => tar(["-cf", tarFile, "-C", dir, "."]));
  const tarPlainBytes = (await stat(tarFile)).size;
  await rm(tarFile);
  log(`  tar -cf ${secs(tarPlain.ms)} s (${(tarPlainBytes / MB).toFixed(0)} MB)`);
  const tarGz = await timed(() => tar(["-czf", `${tarFile}.gz`, "-C", dir, "."]));
  const tarGzBytes = (await stat(`${tarFile}.gz`)).size;
  await rm(`${tarFile}.gz`);
  log(`  tar -czf ${secs(tarGz.ms)} s (${(tarGzBytes / MB).toFixed(0)} MB)`);

  // Before the restore: the restored database's own first backup would run beside the copy.
  const copy = await timed(() => run("cp", ["-a", dir, join(scratch, "copy")]));
  await rm(join(scratch, "copy"), { recursive: true, force: true });
  log(`  cp -a ${secs(copy.ms)} s`);

  log("restore (latest) via the API…");
  const restore = await timed(async () => {
    const res = await api.post(`/v1/databases/${src.id}/restore`, { name: "bench-1gb-restored" });
    if (res.status !== 201) throw new Error(`restore failed: ${res.status} ${JSON.stringify(res.body)}`);
    await waitRunning(api, res.body.data.id, "running", 30 * 60_000);
    return { id: res.body.data.id as string, cs: res.body.data.connection_string as string };
  });
  const client = await connect(restore.value.cs);
  const restoredRows = Number((await client.query("SELECT count(*) AS n FROM fill")).rows[0].n);
  await client.end();
  if (restoredRows !== filled.rows) throw new Error(`the restored database holds ${restoredRows} rows, not ${filled.rows}`);
  log(`  restored → running in ${secs(restore.ms)} s (${restoredRows} rows, as the source)`);
  for (const id of [restore.value.id, src.id]) await api.delete(`/v1/databases/${id}`);
  return { filled, catchUp, dataBytes, walBytes, backup, tarPlain, tarPlainBytes, tarGz, tarGzBytes, restore, copy };
}

/** now − latest_restore_time each second, for RPO_SECONDS. */
async function sampleLag(api: Api, id: string): Promise<{ lags: number[]; failing: number }> {
  const lags: number[] = [];
  let failing = 0;
  const end = performance.now() + RPO_SECONDS * 1000;
  while (performance.now() < end) {
    const next = performance.now() + 1000;
    const w = await backupsOf(api, id);
    if (w.wal_archiving.status !== "healthy") failing++;
    if (w.latest_restore_time !== null) lags.push((Date.now() - Date.parse(w.latest_restore_time)) / 1000);
    await sleep(Math.max(0, next - performance.now()));
  }
  return { lags, failing };
}

async function rpo(api: Api) {
  const db = await createRunning(api, "bench-rpo");
  await waitFirstBackup(api, db.id, 600_000);
  const client = await connect(db.cs);
  await client.query("CREATE TABLE ticks (n bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())");
  let writing = true;
  let written = 0;
  const writer = (async () => {
    while (writing) {
      const next = performance.now() + 100;
      await client.query("INSERT INTO ticks (n) VALUES ($1)", [++written]);
      await sleep(Math.max(0, next - performance.now()));
    }
  })();
  log(`RPO under a row every 100 ms, ${RPO_SECONDS} s…`);
  const busy = await sampleLag(api, db.id);
  writing = false;
  await writer;
  await client.end();
  log(
    `  ${written} rows written; lag p50 ${summary(busy.lags).p50.toFixed(1)} s, max ${summary(busy.lags).max.toFixed(1)} s; idle ${RPO_SECONDS} s…`,
  );
  const idle = await sampleLag(api, db.id);
  log(`  idle lag p50 ${summary(idle.lags).p50.toFixed(1)} s, max ${summary(idle.lags).max.toFixed(1)} s`);
  await api.delete(`/v1/databases/${db.id}`);
  return { busy, idle, written };
}

/** create → running as the API shows it (polled every 20 ms), one database after another. */
async function creates(api: Api, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    const res = await api.post("/v1/databases", { name: `bench-${i}`, region: "fsn1", tier: "micro" });
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
    for (;;) {
      const got = await api.get(`/v1/databases/${res.body.data.id}`);
      if (got.body.data?.status === "running") break;
      if (got.status !== 200 || got.body.data?.status === "failed") throw new Error(`unexpected: ${JSON.stringify(got.body)}`);
      if (performance.now() - t0 > 60_000) throw new Error(`${res.body.data.id} not running after 60 s`);
      await sleep(20);
    }
    times.push(performance.now() - t0);
  }
  return times;
}

async function createsOn(root: string | undefined, label: string) {
  const stack = await startStack({ ...(root && { root }), env: { LOG_LEVEL: "silent", AGENT_CAPACITY: String(COUNT + 5) } });
  try {
    const s = summary(await creates(await account(stack, "create"), COUNT));
    log(`  ${label}: create→running p50 ${fmt(s.p50)} ms, p95 ${fmt(s.p95)} ms`);
    return s;
  } finally {
    await stack.destroy();
  }
}

const dist = (xs: number[]) => {
  const s = summary(xs);
  return `${s.p50.toFixed(1)} | ${s.p95.toFixed(1)} | ${s.max.toFixed(1)}`;
};

async function main() {
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  log(`machine: ${machine}; starting the local stack (file store)…`);
  const scratch = await mkdtemp(join(tmpdir(), "bench-backups-"));
  const stack = await startStack({ env: { LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "silent" } });
  let b: Awaited<ReturnType<typeof baseBackupAndRestore>>;
  let r: Awaited<ReturnType<typeof rpo>>;
  try {
    const api = await account(stack, "bkpbench");
    b = await baseBackupAndRestore(stack, api, scratch);
    r = await rpo(api);
  } catch (err) {
    const file = join(tmpdir(), `bench-backups-stack-${Date.now()}.log`);
    await writeFile(file, stack.output());
    log(`the stack's output (LOG_LEVEL=${stack.env.LOG_LEVEL}, BENCH_LOG_LEVEL sets it): ${file}`);
    throw err;
  } finally {
    await stack.destroy();
    await rm(scratch, { recursive: true, force: true });
  }

  log(`create→running, ${COUNT} each: ${BASELINE_REF} (before backups) and this tree…`);
  const before = await withBaselineTree(BASELINE_REF, log, (root) => createsOn(root, BASELINE_REF));
  const head = (await run("git", ["rev-parse", "--short", "HEAD"])).stdout.trim();
  const now = await createsOn(undefined, "this tree");
  const createRatio = now.p50 / before.p50;
  log(`  ratio (p50): ${createRatio.toFixed(2)}`);

  const mbps = (bytes: number, ms: number) => (bytes / MB / (ms / 1000)).toFixed(0);
  const ratio = (a: number, x: number) => (a / x).toFixed(2);
  const size = (bytes: number) => `${(bytes / MB).toFixed(0)} MB`;
  await writeSection(
    "Backups and restore",
    [
      "Command: `npm run bench:backups` (test/bench/backups-bench.ts; BENCH_BACKUP_GB, BENCH_RPO_SECONDS, BENCH_COUNT,",
      "BENCH_BASELINE_REF). Whole local stack, file blob store (the default), micro databases.",
      `Machine: ${machine}, shared and noisy — compare the ratios, not the absolute numbers.`,
      "",
      `A micro database filled through a TLS client with ${b.filled.rows} rows of 512 random bytes`,
      `(\`INSERT … SELECT generate_series\`, 100 000 rows a statement): table ${size(b.filled.tableBytes)} in ${secs(b.filled.ms)} s;`,
      `the archive was restorable through the fill's end ${secs(b.catchUp.ms)} s later. Data directory ${size(b.dataBytes)}`,
      `(pg_wal ${size(b.walBytes)}, which a base backup leaves out and tar does not). The backup is timed from`,
      "`POST …/backups` until the list shows it `completed` (polled every 250 ms); tar and cp ran on the same",
      "directory with the database running; the restore from `POST …/restore` (latest) until `running`.",
      "",
      "| measurement | seconds | MB/s of the data directory | size | ratio to the baseline |",
      "|---|---|---|---|---|",
      `| base backup via API (BASE_BACKUP, gzip level 1, into the store) | ${secs(b.backup.ms)} | ${mbps(b.dataBytes, b.backup.ms)} | ${size(b.backup.sizeBytes)} stored | ${ratio(b.backup.ms, b.tarPlain.ms)} × tar -cf, ${ratio(b.backup.ms, b.tarGz.ms)} × tar -czf |`,
      `| baseline: \`tar -cf\` | ${secs(b.tarPlain.ms)} | ${mbps(b.dataBytes, b.tarPlain.ms)} | ${size(b.tarPlainBytes)} | |`,
      `| baseline: \`tar -czf\` (gzip level 6) | ${secs(b.tarGz.ms)} | ${mbps(b.dataBytes, b.tarGz.ms)} | ${size(b.tarGzBytes)} | |`,
      `| restore (latest) → running via API | ${secs(b.restore.ms)} | ${mbps(b.dataBytes, b.restore.ms)} | ${b.filled.rows} rows, as the source | ${ratio(b.restore.ms, b.copy.ms)} × cp -a |`,
      `| baseline: \`cp -a\` of the data directory | ${secs(b.copy.ms)} | ${mbps(b.dataBytes, b.copy.ms)} | | |`,
      "",
      `RPO: now − \`latest_restore_time\` sampled each second for ${RPO_SECONDS} s while a client inserted a row every`,
      `~100 ms (${r.written} rows) on another micro database, then ${RPO_SECONDS} s idle (target: max < 90 s).`,
      "",
      "| phase | samples | p50 s | p95 s | max s | samples with archiving failing |",
      "|---|---|---|---|---|---|",
      `| steady writes | ${r.busy.lags.length} | ${dist(r.busy.lags)} | ${r.busy.failing} |`,
      `| idle | ${r.idle.lags.length} | ${dist(r.idle.lags)} | ${r.idle.failing} |`,
      "",
      `Create → running (polled every 20 ms; ${COUNT} databases one after another, one organization on the internal plan,`,
      `a fresh stack each) with WAL archiving and each database's first base backup, beside commit ${BASELINE_REF}`,
      "(before the backups work), run from a git worktree with its own `npm install`:",
      "",
      "| tree | runs | p50 ms | p95 ms | min ms | max ms |",
      "|---|---|---|---|---|---|",
      `| ${BASELINE_REF} (no archiving) | ${COUNT} | ${fmt(before.p50)} | ${fmt(before.p95)} | ${fmt(before.min)} | ${fmt(before.max)} |`,
      `| this tree at ${head} (archiving on) | ${COUNT} | ${fmt(now.p50)} | ${fmt(now.p95)} | ${fmt(now.min)} | ${fmt(now.max)} |`,
      "",
      `Ratio p50 with archiving / without: **${createRatio.toFixed(2)}** — every change since ${BASELINE_REF} counts, not archiving alone.`,
    ].join("\n"),
  );
  log("written to docs/benchmarks.md");
}

/** In-process MB/s of the two CPU costs on a backup's path, gzip level 1 and sealing, over the same 64 MiB of random bytes. */
async function cpuThroughput(): Promise<{ gzip: number; seal: number; open: number }> {
  const { gzipSync, constants } = await import("node:zlib");
  const { Readable, Writable } = await import("node:stream");
  const { pipeline } = await import("node:stream/promises");
  const { sealStream, openStream } = await import("../../services/provisioner-agent/src/backups/encryption.ts");
  const data = randomBytes(64 * MB);
  const chunks = () =>
    Readable.from(
      (function* () {
        for (let at = 0; at < data.length; at += 64 * 1024) yield data.subarray(at, at + 64 * 1024);
      })(),
    );
  const sink = (keep?: Buffer[]) =>
    new Writable({
      write(c, _e, cb) {
        keep?.push(c);
        cb();
      },
    });
  const key = randomBytes(32);
  const gz = await timed(async () => gzipSync(data, { level: constants.Z_BEST_SPEED }));
  const sealed: Buffer[] = [];
  const seal = await timed(() => pipeline(chunks(), sealStream({ dataKeyId: "bench", dataKey: key, name: "db/x" }), sink(sealed)));
  const open = await timed(() =>
    pipeline(
      Readable.from(sealed),
      openStream("db/x", async () => key),
      sink(),
    ),
  );
  const rate = (ms: number) => 64 / (ms / 1000);
  return { gzip: rate(gz.ms), seal: rate(seal.ms), open: rate(open.ms) };
}

const ENCRYPTION_MB = Number(process.env.BENCH_ENCRYPTION_MB ?? 512);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** Base backup and restore fetch with and without encryption at rest, on one instance, alternating. */
async function encryptionMain() {
  const machine = `${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
  const loadStart = loadavg()[0]!;
  const roundLoad: number[] = [];
  const host = await startHost("bench-enc");
  const scratch = await mkdtemp(join(tmpdir(), "bench-enc-"));
  // The restore's tar runs as the server's user, which must reach its target inside.
  await run("chmod", ["755", scratch]);
  try {
    const { id } = await startInstance(host, "db-bench-enc", { tier: "small" });
    log(`machine: ${machine}; filling ${id} to ${ENCRYPTION_MB} MB…`);
    const payload = Array.from({ length: 16 }, () => "sha256(random()::text::bytea)").join(" || ");
    await host.asAgent(id, "CREATE TABLE fill (id bigint NOT NULL, payload bytea NOT NULL)");
    for (let rows = 0; ; rows += 100_000) {
      const n = Number((await host.asAgent(id, "SELECT pg_total_relation_size('fill') AS n"))[0]!.n);
      if (n >= ENCRYPTION_MB * MB) break;
      await host.asAgent(id, `INSERT INTO fill SELECT g, ${payload} FROM generate_series(${rows + 1}, ${rows + 100_000}) g`);
    }
    await host.asAgent(id, "CHECKPOINT");
    const dataBytes = await duBytes(join(host.dataDir, "instances", id));
    const key = randomBytes(32).toString("base64");
    const stores: Record<"plain" | "encrypted", BlobStore> = {
      plain: openBlobStore(`file://${join(scratch, "plain")}`, {}),
      encrypted: openBlobStore(`file://${join(scratch, "encrypted")}`, { BACKUP_ENCRYPTION_KEY: key }),
    };
    const connection = (await host.runtime.agentConnection(id))!;
    const server = await host.runtime.serverFiles(id);
    const times = {
      plain: { backup: [] as number[], restore: [] as number[] },
      encrypted: { backup: [] as number[], restore: [] as number[] },
    };
    let stored = { plain: 0, encrypted: 0 };
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternate which goes first, so neither always meets a warm page cache.
      const order = round % 2 === 1 ? (["plain", "encrypted"] as const) : (["encrypted", "plain"] as const);
      for (const kind of order) {
        const store = stores[kind];
        const backupId = `bkp-${kind}-${round}`;
        const backup = await timed(() =>
          takeBaseBackup({
            store,
            databaseId: id,
            backupId,
            version: "17",
            connection,
            stagingRoot: join(host.dataDir, "backup-staging"),
            server,
            // The WAL wait is the same either way (the archiver's), so left out: this is the data path alone.
            waitForWal: async () => {},
            now: () => new Date(),
            signal: new AbortController().signal,
          }),
        );
        stored = { ...stored, [kind]: (await store.list(`${id}/base/${backupId}/`)).reduce((a, o) => a + o.size, 0) };
        const target = join(scratch, `restore-${kind}-${round}`);
        await run("mkdir", ["-p", target]);
        await run("chown", [`${server.uid}:${server.gid}`, target]);
        const restore = await timed(async () => extractTarGz(await store.get(baseTarKey(id, backupId)), target, server));
        await rm(target, { recursive: true, force: true });
        times[kind].backup.push(backup.ms);
        times[kind].restore.push(restore.ms);
        log(`  round ${round} ${kind}: base backup ${secs(backup.ms)} s, restore fetch ${secs(restore.ms)} s`);
      }
      roundLoad.push(loadavg()[0]!);
      log(`  load after round ${round}: ${roundLoad[round - 1]!.toFixed(1)}`);
    }
    const mbps = (ms: number) => (dataBytes / MB / (ms / 1000)).toFixed(0);
    const med = (xs: number[]) => summary(xs).p50;
    const row = (what: string, kind: "plain" | "encrypted", xs: number[]) =>
      `| ${what} | ${kind} | ${xs.map((x) => secs(x)).join(", ")} | ${secs(med(xs))} | ${mbps(med(xs))} |`;
    const ratioOf = (k: "backup" | "restore") => (med(times.encrypted[k]) / med(times.plain[k])).toFixed(2);
    // Each round's own ratio: the rounds ran minutes apart on a machine whose load drifts.
    const roundRatios = (k: "backup" | "restore") => times.encrypted[k].map((x, i) => x / times.plain[k][i]!);
    const ratioSpread = (k: "backup" | "restore") => {
      const r = roundRatios(k);
      return `median of the rounds' own ratios ${med(r).toFixed(2)}, spread ${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}`;
    };
    const head = (await run("git", ["rev-parse", "--short", "HEAD"])).stdout.trim();
    const cpu = await cpuThroughput();
    const loadEnd = loadavg()[0]!;
    log(`  in process: gzip-1 ${cpu.gzip.toFixed(0)} MB/s, seal ${cpu.seal.toFixed(0)} MB/s, open ${cpu.open.toFixed(0)} MB/s`);
    await writeSection(
      "Backups: encryption at rest",
      [
        `Command: \`BENCH_ONLY=encryption npm run bench:backups\` (test/bench/backups-bench.ts; BENCH_ENCRYPTION_MB=${ENCRYPTION_MB},`,
        `BENCH_ROUNDS=${ROUNDS}), tree ${head}. Machine: ${machine}, shared with other engineers' tests: 1-minute load average`,
        `${loadStart.toFixed(1)} at the start, ${loadEnd.toFixed(1)} at the end, after each round ${roundLoad.map((x) => x.toFixed(1)).join(", ")}:`,
        "compare the ratios. One PostgreSQL 17 instance (small tier) on a test host, filled with rows of 512 random bytes",
        `(data directory ${(dataBytes / MB).toFixed(0)} MB); each round takes a base backup into a plain file store and into an`,
        "encrypted one (AES-256-GCM records of 1 MiB, backups/encryption.ts), in alternating order, and restores each:",
        "BASE_BACKUP into staging → server.key filter → gzip level 1 → (encryption) → store; restore fetch: store →",
        "(decryption) → gunzip → `tar -x` as the server's user. The WAL wait and replay, the same either way, are left out.",
        "",
        "| step | store | seconds per round | median s | MB/s of the data directory (median) |",
        "|---|---|---|---|---|",
        row("base backup", "plain", times.plain.backup),
        row("base backup", "encrypted", times.encrypted.backup),
        row("restore fetch", "plain", times.plain.restore),
        row("restore fetch", "encrypted", times.encrypted.restore),
        "",
        `Encrypted / plain (median): base backup **${ratioOf("backup")}** (${ratioSpread("backup")}), restore fetch`,
        `**${ratioOf("restore")}** (${ratioSpread("restore")}). Stored: plain`,
        `${(stored.plain / MB).toFixed(1)} MB, encrypted ${(stored.encrypted / MB).toFixed(1)} MB (header and 21 bytes per MiB record).`,
        "",
        `CPU alone, in the bench's process right after (64 MiB of random bytes): gzip level 1 ${cpu.gzip.toFixed(0)} MB/s,`,
        `sealing (sealStream) ${cpu.seal.toFixed(0)} MB/s, opening ${cpu.open.toFixed(0)} MB/s: per byte, encryption costs`,
        `${(cpu.gzip / cpu.seal).toFixed(2)} × what the compression before it costs.`,
      ].join("\n"),
    );
    log("written to docs/benchmarks.md");
  } finally {
    await host.close();
    await rm(scratch, { recursive: true, force: true });
  }
}

runBench(process.env.BENCH_ONLY === "encryption" ? encryptionMain : main);
