/**
 * `npm run bench:proxy`: the connection meters' overhead, side by side in one
 * run. One real instance (PostgreSQL 17, tier medium), reached three ways:
 * directly on its private port; through the nftables meter (the kernel DNATs
 * a published port and counts, src/proxy/nft-meter.ts); through the Node
 * proxy, in an agent process of its own (test/proxy/agent-child.ts).
 * pgbench select-only (Debian's postgresql-contrib) with TLS, the modes in
 * rotating order each round so all see the same machine. Prints and writes to
 * docs/benchmarks.md: TPS of each and the ratios to direct (target ≥ 0.9),
 * latency percentiles and what each adds at p99, and the agent's memory per
 * idle connection (RSS delta over N idle TLS sessions). Without usable nft
 * the nftables row is left out, saying why.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { createInstanceManager } from "../../services/provisioner-agent/src/instances/instance-manager.ts";
import { createConnectionProxy } from "../../services/provisioner-agent/src/proxy/connection-proxy.ts";
import type { ConnectionProxy } from "../../services/provisioner-agent/src/proxy/counters.ts";
import { createNftMeter, nftTableName } from "../../services/provisioner-agent/src/proxy/nft-meter.ts";
import { freePort, randomPassword, scramVerifier } from "../../services/provisioner-agent/test/instances/helpers.ts";
import { fmt, runBench, writeSection } from "./report.ts";

// Many short rounds rather than a few long ones: on a shared machine the load drifts by tens of percent
// within a minute, and modes measured seconds apart see nearly the same machine.
const SECONDS = Number(process.env.BENCH_PROXY_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_PROXY_ROUNDS ?? 9);
const CLIENTS = Number(process.env.BENCH_PROXY_CLIENTS ?? 8);
const IDLE = Number(process.env.BENCH_PROXY_IDLE ?? 150);
const SCALE = Number(process.env.BENCH_PROXY_SCALE ?? 10);
const HOST = "db-bench.example.test";
const ID = "proxybench";
const AGENT = "bench-proxy";
const run = promisify(execFile);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** One pgbench select-only run; TPS from its report, latencies (µs) from its per-transaction log. */
async function pgbench(port: number, password: string, logDir: string, tag: string): Promise<{ tps: number; latencies: number[] }> {
  const prefix = join(logDir, tag);
  const { stdout } = await run(
    "pgbench",
    ["-h", "127.0.0.1", "-p", String(port), "-U", "dbadmin", "-S", "-M", "prepared", "-c", String(CLIENTS), "-j", "2"].concat([
      "-T",
      String(SECONDS),
      "-n",
      "-l",
      "--log-prefix",
      prefix,
      "defaultdb",
    ]),
    { env: { ...process.env, PGPASSWORD: password, PGSSLMODE: "require" }, maxBuffer: 1 << 24 },
  );
  const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout);
  if (!m) throw new Error(`no tps in pgbench output:\n${stdout}`);
  const latencies: number[] = [];
  for (const f of readdirSync(logDir).filter((n) => n.startsWith(`${tag}.`))) {
    for (const line of readFileSync(join(logDir, f), "utf8").split("\n")) {
      const us = Number(line.split(" ")[2]);
      if (line && Number.isFinite(us)) latencies.push(us);
    }
  }
  return { tps: Number(m[1]), latencies };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m![1]) * 1024;
}

/** The agent's RSS growth per idle proxied TLS session (the clients live in this process, the proxy in the agent's). */
async function memoryPerIdleConnection(agentPid: number, port: number, password: string, ca: string): Promise<number> {
  const settle = () => new Promise((r) => setTimeout(r, 2000));
  await settle();
  const before = rssBytes(agentPid);
  const clients: pg.Client[] = [];
  try {
    for (let i = 0; i < IDLE; i++) {
      const c = new pg.Client({ host: "127.0.0.1", port, user: "dbadmin", password, database: "defaultdb", ssl: { ca, servername: HOST } });
      await c.connect();
      await c.query("SELECT 1");
      clients.push(c);
    }
    await settle();
    return (rssBytes(agentPid) - before) / IDLE;
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
}

/** Size of one conntrack entry in the kernel's slab (what a connection costs under the nftables meter), if readable. */
function conntrackEntryBytes(): number | undefined {
  try {
    const line = readFileSync("/proc/slabinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("nf_conntrack "));
    return line ? Number(line.split(/\s+/)[3]) : undefined;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), "dbaas-bench-proxy-"));
  const logDir = await mkdtemp(join(tmpdir(), "dbaas-bench-pgbench-"));
  const proxy = createConnectionProxy({ dir: join(dataDir, "proxy"), listenAddress: "127.0.0.1" });
  const m = createInstanceManager({ dataDir, agentId: AGENT, proxy });
  let agent: ChildProcess | undefined;
  let nft: ConnectionProxy | undefined;
  let nftUnusable: string | undefined;
  try {
    const password = randomPassword();
    const port = await freePort();
    await m.provision(ID, { major: "17" });
    await m.start(ID, { port, tier: "medium", hostname: HOST, scramVerifier: scramVerifier(password) });
    const ca = await m.caCertificatePem();
    // The proxy runs in an agent process of its own, as in production; the instance keeps running meanwhile.
    await proxy.close();
    agent = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        fileURLToPath(new URL("../../services/provisioner-agent/test/proxy/agent-child.ts", import.meta.url)),
        dataDir,
        AGENT,
      ],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    await new Promise<void>((resolve, reject) => {
      agent!.stdout!.on("data", (d: Buffer) => d.toString().includes("serving") && resolve());
      agent!.once("exit", (code) => reject(new Error(`agent exited with ${code}`)));
    });
    const c = new pg.Client({ host: "127.0.0.1", port, user: "dbadmin", password, database: "defaultdb", ssl: { ca, servername: HOST } });
    await c.connect();
    const privatePort = Number((await c.query<{ p: string }>("SELECT current_setting('port') AS p")).rows[0]!.p);
    const version = (await c.query<{ v: string }>("SELECT version() AS v")).rows[0]!.v;
    await c.end();
    await run("pgbench", ["-h", "127.0.0.1", "-p", String(privatePort), "-U", "dbadmin", "-i", "-q", "-s", String(SCALE), "defaultdb"], {
      env: { ...process.env, PGPASSWORD: password, PGSSLMODE: "require" },
    });
    // The nftables meter, in this process (the kernel does the work): another published port to the same server.
    const nftPort = await freePort();
    try {
      nft = createNftMeter({ dataDir, agentId: AGENT, listenAddress: "127.0.0.1" });
      await nft.serve(ID, { port: nftPort, target: { host: "127.0.0.1", port: privatePort } });
    } catch (e) {
      nftUnusable = (e as Error).message;
      process.stdout.write(`nftables meter left out: ${nftUnusable}\n`);
    }

    type Mode = "direct" | "nftables" | "proxy";
    const modes: Mode[] = nftUnusable ? ["direct", "proxy"] : ["direct", "nftables", "proxy"];
    const portOf: Record<Mode, number> = { direct: privatePort, nftables: nftPort, proxy: port };
    const runs = Object.fromEntries(modes.map((m) => [m, { tps: [] as number[], latencies: [] as number[] }])) as Record<
      Mode,
      { tps: number[]; latencies: number[] }
    >;
    for (let r = 0; r < ROUNDS; r++) {
      // Each mode goes first in turn: a slow start of the machine does not land on one mode.
      for (const mode of modes.map((_, i) => modes[(i + r) % modes.length]!)) {
        const res = await pgbench(portOf[mode], password, logDir, `${mode}${r}`);
        runs[mode].tps.push(res.tps);
        for (const us of res.latencies) runs[mode].latencies.push(us);
        process.stdout.write(`round ${r + 1} ${mode}: ${res.tps.toFixed(0)} tps\n`);
      }
    }
    const perIdle = await memoryPerIdleConnection(agent.pid!, port, password, ca);
    const conntrackBytes = nft ? conntrackEntryBytes() : undefined;
    const nftBytes = nft ? (await nft.counters([ID])).get(ID) : undefined;

    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const rows = modes.map((mode) => {
      const lat = runs[mode].latencies.sort((a, b) => a - b);
      return { mode, tps: mean(runs[mode].tps), p50: percentile(lat, 50), p99: percentile(lat, 99), all: runs[mode].tps };
    });
    const direct = rows[0]!;
    const label: Record<Mode, string> = {
      direct: "direct (private port)",
      nftables: "nftables meter (published port, kernel DNAT + counters)",
      proxy: "Node proxy (published port, agent process)",
    };
    const body = [
      `${cpus().length} cores (shared), ${version.split(" on ")[0]}, tier medium, pgbench 15 select-only (-S -M prepared), ` +
        `${CLIENTS} clients, 2 threads, TLS (sslmode=require), scale ${SCALE}; ${ROUNDS} rounds of ${SECONDS} s per mode, ` +
        "the order rotating each round. The nftables meter (the default: CONNECTION_METER=auto where nft works) " +
        "forwards and counts in the kernel; the Node proxy (the fallback) runs in an agent process of its own, " +
        "counting every chunk with a pwrite before forwarding it.",
      "",
      "| path | TPS (mean of rounds) | min–max of rounds | p50 latency | p99 latency |",
      "|---|---|---|---|---|",
      ...rows.map(
        (r) =>
          `| ${label[r.mode]} | ${fmt(r.tps)} | ${fmt(Math.min(...r.all))}–${fmt(Math.max(...r.all))} | ${(r.p50 / 1000).toFixed(2)} ms | ${(r.p99 / 1000).toFixed(2)} ms |`,
      ),
      "",
      ...rows
        .slice(1)
        .flatMap((r) => [
          `- TPS ratio ${r.mode} / direct: **${(r.tps / direct.tps).toFixed(3)}** (target ≥ 0.9; median of the rounds' own ratios ` +
            `${median(r.all.map((tps, i) => tps / direct.all[i]!)).toFixed(3)}); ` +
            `p99 latency added: ${((r.p99 - direct.p99) / 1000).toFixed(3)} ms (p50: ${((r.p50 - direct.p50) / 1000).toFixed(3)} ms).`,
        ]),
      ...(nftUnusable ? [`- nftables meter not measured: ${nftUnusable}.`] : []),
      ...(nft
        ? [
            "- nftables: no agent memory per connection (nothing of it is in the agent's process); the kernel keeps one conntrack " +
              `entry per connection, ${conntrackBytes ?? "?"} bytes (/proc/slabinfo's nf_conntrack object size). ` +
              `Counted over the run: ${nftBytes?.bytesIn ?? 0n} bytes in, ${nftBytes?.bytesOut ?? 0n} bytes out (IP packets, headers included).`,
          ]
        : []),
      `- Node proxy: agent memory per idle proxied connection ${(perIdle / 1024).toFixed(1)} KiB (RSS delta over ${IDLE} idle TLS sessions).`,
    ].join("\n");
    process.stdout.write(`\n${body}\n`);
    await writeSection("Connection proxy (npm run bench:proxy)", body);
  } finally {
    agent?.kill("SIGKILL");
    if (nft) {
      await nft.close().catch(() => {});
      execFileSync("nft", ["delete", "table", "ip", nftTableName(dataDir, AGENT)], { stdio: "ignore" });
    }
    await m.stopAll().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
    await rm(logDir, { recursive: true, force: true });
    await rm(m.socketDir, { recursive: true, force: true });
  }
}

runBench(main);
