/**
 * `npm run bench:edge`: the database's edge on the real local stack (docs/product.md, Trusted sources and
 * connection pooling), one database (tier small, max_connections 100) reached two ways in the same run:
 * directly on its published port and through its PgBouncer (transaction mode, the tier's pool of 40).
 * pgbench 15 select-only with TLS, the two paths alternating round by round so both see the same machine:
 *   - steady connections (-M simple: protocol-level prepared statements do not survive transaction pooling
 *     in PgBouncer 1.18), ratio pooler / direct (target ≥ 0.8);
 *   - a new connection per transaction (-C), ratio pooler / direct (target ≥ 5), and where such a connection's time
 *     goes: pgbench's connection time, the CPU per connection of pgbench, PgBouncer and the server (from /proc),
 *     the server sessions opened per client connection (0 through the pooler: no server login per client);
 *   - 1,000 idle clients held through the pooler: PgBouncer's memory and the server's (all its processes);
 *   - the cost of trusted sources: direct TPS with 50 entries listed vs none (the nftables set lookup on
 *     each new connection; ratio target ≥ 0.97), and how long a change takes to be enforced.
 * Prints and writes its section of docs/benchmarks.md.
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { createApi, waitStatus } from "../support/api.ts";
import { admitted, refused, untilAttempt } from "../support/edge.ts";
import { startStack } from "../support/stack.ts";
import { benchLog, runBench, writeSection } from "./report.ts";

const SECONDS = Number(process.env.BENCH_EDGE_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_EDGE_ROUNDS ?? 5);
const CLIENTS = Number(process.env.BENCH_EDGE_CLIENTS ?? 8);
const IDLE = Number(process.env.BENCH_EDGE_IDLE ?? 1000);
const run = promisify(execFile);
/**
 * pgbench itself, not Debian's wrapper (/usr/bin/pgbench, a Perl script picking a version on every call): the
 * newest /usr/lib/postgresql/<major>/bin/pgbench; PGBENCH overrides.
 */
const PGBENCH =
  process.env.PGBENCH ??
  (() => {
    try {
      const majors = readdirSync("/usr/lib/postgresql")
        .filter((m) => existsSync(`/usr/lib/postgresql/${m}/bin/pgbench`))
        .sort((a, b) => Number(b) - Number(a));
      return majors.length ? `/usr/lib/postgresql/${majors[0]}/bin/pgbench` : "pgbench";
    } catch {
      return "pgbench";
    }
  })();

interface Target {
  port: number;
  password: string;
}

/** What a -C run (a new connection per transaction) cost per connection: pgbench's own timing and the CPU of each party. */
interface ConnectCost {
  /** pgbench's "average connection time", ms. */
  connectMs: number;
  /** CPU time per connection (ms) of pgbench itself (TLS and the client's SCRAM proof), of PgBouncer, and of the server (postmaster and its processes, exited ones included). */
  clientCpuMs: number;
  bouncerCpuMs: number;
  serverCpuMs: number;
  /** New server sessions (pg_stat_database.sessions) per client connection. */
  serverSessions: number;
}

/** Per label, each -C run's costs. */
const connectCosts = new Map<string, ConnectCost[]>();

/** The processes whose CPU a -C run is charged to (set once the database runs). */
const watched = { bouncer: 0, postmaster: 0, sessions: async () => 0 };

const TICK_MS = 10; // USER_HZ is 100 on Linux
/** utime + stime (+ cutime + cstime: children waited for) of `pid`, ms. */
function cpuMs(pid: number | "self", withChildren: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // After the comm: state is field 3, so utime (14) is f[11], stime f[12], cutime f[13], cstime f[14].
    const own = Number(f[11]) + Number(f[12]);
    return (withChildren ? own + Number(f[13]) + Number(f[14]) : own) * TICK_MS;
  } catch {
    return 0;
  }
}
/** The server's CPU so far: the postmaster, the processes it reaped, the ones still running. */
const serverCpuMs = () => cpuMs(watched.postmaster, true) + childrenOf(watched.postmaster).reduce((sum, p) => sum + cpuMs(p, false), 0);

async function pgbench(t: Target, extra: string[], label?: string): Promise<number> {
  const before = label
    ? { client: cpuMs("self", true), bouncer: cpuMs(watched.bouncer, false), server: serverCpuMs(), sessions: await watched.sessions() }
    : undefined;
  const { stdout } = await run(
    PGBENCH,
    [
      "-h",
      "127.0.0.1",
      "-p",
      String(t.port),
      "-U",
      "dbadmin",
      "-S",
      "-c",
      String(CLIENTS),
      "-j",
      "2",
      "-T",
      String(SECONDS),
      "-n",
      ...extra,
      "defaultdb",
    ],
    { env: { ...process.env, PGPASSWORD: t.password, PGSSLMODE: "require" }, maxBuffer: 1 << 24 },
  );
  const m =
    /tps = ([\d.]+) \((?:without initial connection time|including connections establishing)\)/.exec(stdout) ??
    /tps = ([\d.]+)/.exec(stdout);
  if (!m) throw new Error(`no tps in pgbench output:\n${stdout}`);
  const conn = /average connection time = ([\d.]+) ms/.exec(stdout);
  const n = Number(/number of transactions actually processed: (\d+)/.exec(stdout)?.[1] ?? 0);
  if (before && conn && n > 0) {
    const sessions = (await watched.sessions()) - before.sessions;
    connectCosts.set(label!, [
      ...(connectCosts.get(label!) ?? []),
      {
        connectMs: Number(conn[1]),
        clientCpuMs: (cpuMs("self", true) - before.client) / n,
        bouncerCpuMs: (cpuMs(watched.bouncer, false) - before.bouncer) / n,
        serverCpuMs: (serverCpuMs() - before.server) / n,
        serverSessions: sessions / n,
      },
    ]);
  }
  return Number(m[1]);
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Alternates `a` and `b` (which first, rotating) for ROUNDS rounds: each one's TPS and the rounds' own ratios b / a. */
async function sideBySide(what: string, a: () => Promise<number>, b: () => Promise<number>, rounds = ROUNDS) {
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      as.push(await a());
      bs.push(await b());
    } else {
      bs.push(await b());
      as.push(await a());
    }
    benchLog(`${what} round ${i + 1}: ${as[i]!.toFixed(0)} vs ${bs[i]!.toFixed(0)} TPS`);
  }
  return { a: mean(as), b: mean(bs), ratio: mean(bs) / mean(as), medianRatio: median(bs.map((x, i) => x / as[i]!)), as, bs };
}

const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
/** PSS where the kernel gives it (shared buffers counted once across a server's processes), else RSS. */
function pss(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))![1]) * 1024;
  } catch {
    return rss(pid);
  }
}
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const p of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) out.push(Number(p));
    } catch {
      // gone
    }
  }
  return out;
}
/** A process that exited between the listing and the read (a backend whose client just left) counts 0. */
const pssOrZero = (pid: number) => {
  try {
    return pss(pid);
  } catch {
    return 0;
  }
};
const serverMemory = (postmaster: number) => [postmaster, ...childrenOf(postmaster)].reduce((sum, p) => sum + pssOrZero(p), 0);
const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ")[0]!;

async function main() {
  const loadAtStart = loadavg();
  const stack = await startStack({ agents: "fsn1", env: { LOG_LEVEL: "warn" } });
  try {
    const api = createApi(stack.baseUrl);
    const account = await api.signup("bench-edge");
    // The internal plan: fifty entries added and removed each round must not meet the free plan's rate limit.
    await run(process.execPath, ["--import", "tsx", "services/identity/src/cli/set-plan.ts", account.organization.id, "internal"], {
      env: { ...process.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}`, DBAAS_DATA_DIR: stack.dataDir },
    });
    api.setToken((await api.post("/v1/auth/token", { email: account.email, password: account.password })).body.data.access_token);
    await api.addPaymentMethod();
    const created = await api.post("/v1/databases", { name: "edge-bench", region: "fsn1", tier: "small" });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    const db = created.body.data;
    await waitStatus(api, db.id, "running", 120_000, stack.output);
    const pooler = (await api.get(`/v1/databases/${db.id}/pooler`)).body.data;
    const withPw = (cs: string) => cs.replace(":********@", `:${encodeURIComponent(db.password)}@`);
    await untilAttempt("the pooler admits", "127.0.0.1", withPw(pooler.connection_string), admitted);
    const direct: Target = { port: db.port, password: db.password };
    const pooled: Target = { port: pooler.port, password: db.password };
    benchLog(`database ${db.id}: direct port ${direct.port}, pooler port ${pooled.port} (${pooler.mode}, pool ${pooler.pool_size})`);
    await run(PGBENCH, ["-h", "127.0.0.1", "-p", String(direct.port), "-U", "dbadmin", "-i", "-s", "10", "-q", "defaultdb"], {
      env: { ...process.env, PGPASSWORD: db.password, PGSSLMODE: "require" },
    });

    // Whom a -C run's CPU is charged to; the server's sessions counted over one connection kept open (no new session).
    const agentDir = join(stack.dataDir, "agents", "agent-fsn1");
    const bouncer = Number(readFileSync(join(agentDir, "poolers", db.id, "pgbouncer.pid"), "utf8").trim());
    const postmaster = Number(readFileSync(join(agentDir, "instances", db.id, "postmaster.pid"), "utf8").split("\n")[0]);
    const counter = new pg.Client({
      host: "127.0.0.1",
      port: direct.port,
      user: "dbadmin",
      password: db.password,
      database: "defaultdb",
      ssl: { rejectUnauthorized: false },
    });
    await counter.connect();
    Object.assign(watched, {
      bouncer,
      postmaster,
      sessions: async () =>
        Number((await counter.query("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")).rows[0].sessions),
    });

    const steady = await sideBySide(
      "steady",
      () => pgbench(direct, ["-M", "simple"]),
      () => pgbench(pooled, ["-M", "simple"]),
    );
    const perTx = await sideBySide(
      "-C",
      () => pgbench(direct, ["-M", "simple", "-C"], "direct"),
      () => pgbench(pooled, ["-M", "simple", "-C"], "pooled"),
    );

    // What one new connection cost each way during the -C rounds (means over the rounds).
    const cost = (label: string) => {
      const runs = connectCosts.get(label) ?? [];
      const avg = (k: keyof ConnectCost) => mean(runs.map((r) => r[k]));
      return {
        connectMs: avg("connectMs"),
        clientCpuMs: avg("clientCpuMs"),
        bouncerCpuMs: avg("bouncerCpuMs"),
        serverCpuMs: avg("serverCpuMs"),
        serverSessions: avg("serverSessions"),
      };
    };
    const [cDirect, cPooled] = [cost("direct"), cost("pooled")];
    await counter.end();
    benchLog(`-C per connection: direct ${JSON.stringify(cDirect)}; pooled ${JSON.stringify(cPooled)}`);

    // 1,000 idle clients through the pooler.
    const [bouncerBefore, serverBefore] = [rss(bouncer), serverMemory(postmaster)];
    const url = new URL(withPw(pooler.connection_string));
    const clients: pg.Client[] = [];
    for (let i = 0; i < IDLE; i += 100) {
      const batch = Array.from({ length: Math.min(100, IDLE - i) }, async () => {
        const c = new pg.Client({
          host: "127.0.0.1",
          port: Number(url.port),
          user: "dbadmin",
          password: db.password,
          database: "defaultdb",
          ssl: { rejectUnauthorized: false },
        });
        c.on("error", () => {});
        await c.connect();
        await c.query("SELECT 1");
        return c;
      });
      clients.push(...(await Promise.all(batch)));
    }
    await new Promise((r) => setTimeout(r, 2000));
    const [bouncerIdle, serverIdle] = [rss(bouncer), serverMemory(postmaster)];
    const backends = childrenOf(postmaster).length;
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    benchLog(
      `${IDLE} idle through the pooler: PgBouncer ${mib(bouncerBefore)} → ${mib(bouncerIdle)}, server ${mib(serverBefore)} → ${mib(serverIdle)}`,
    );

    // Trusted sources: 50 entries (127.0.0.1/32 among them, the bench's own source) vs none.
    const cs = withPw(db.connection_string);
    // The direct port right after the idle clients left, with no entry listed: two runs found it refusing here
    // ("Connection refused" from pgbench). Waited for, and what was seen reported, rather than failing the bench.
    const seenAfterIdle: string[] = [];
    const afterIdle = await untilAttempt("the direct port admits after the idle clients left", "127.0.0.1", cs, (a) => {
      seenAfterIdle.push(a);
      return admitted(a);
    });
    benchLog(
      `direct port after the idle clients left: ${seenAfterIdle.length} attempt(s) in ${afterIdle.ms} ms (${[...new Set(seenAfterIdle)].join("; ")})`,
    );
    const ids: string[] = [];
    let applyMs: number[] = [];
    const listFifty = async () => {
      for (let i = 0; i < 49; i++) {
        const r = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: `10.${i}.0.0/16` });
        if (r.status !== 201) throw new Error(`trusted source: ${r.status} ${JSON.stringify(r.body)}`);
        ids.push(r.body.data.id);
      }
      const r = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: "127.0.0.1/32" });
      ids.push(r.body.data.id);
      applyMs.push((await untilAttempt("127.0.0.5 refused", "127.0.0.5", cs, refused)).ms);
      // 127.0.0.5 is refused as soon as any entry is in force; the bench's own 127.0.0.1/32 came last, and a pass of
      // the agent may have applied the list without it yet (what the refused pgbench of earlier runs met).
      await untilAttempt("127.0.0.1 admitted", "127.0.0.1", cs, admitted);
    };
    const clear = async () => {
      for (const id of ids.splice(0)) await api.delete(`/v1/databases/${db.id}/trusted-sources/${id}`);
      applyMs.push((await untilAttempt("127.0.0.5 admitted", "127.0.0.5", cs, admitted)).ms);
    };
    let listed = false;
    const withRules = async () => {
      if (!listed) await listFifty();
      listed = true;
      return pgbench(direct, ["-M", "prepared", "-C"]);
    };
    const withoutRules = async () => {
      if (listed) await clear();
      listed = false;
      return pgbench(direct, ["-M", "prepared", "-C"]);
    };
    const rules = await sideBySide("50 rules", withoutRules, withRules);
    if (listed) await clear();
    applyMs = applyMs.sort((a, b) => a - b);

    const body = [
      `${cpus().length} cores (shared; 1-minute load average ${loadAtStart} at the start, ${loadavg()} at the end), the local stack (\`npm run bench:edge\`), one database of tier small (max_connections 100), PostgreSQL 17, PgBouncer 1.18 (Debian) in transaction mode with the tier's pool of ${pooler.pool_size}; pgbench (\`${PGBENCH}\`) select-only (-S), ${CLIENTS} clients, 2 threads, TLS (sslmode=require), scale 10; ${ROUNDS} rounds of ${SECONDS} s per path, alternating which goes first. Both paths go through the agent's nftables meter (published ports).`,
      "",
      "| measurement | direct | through the pooler | ratio pooler / direct (mean; median of rounds) | target |",
      "|---|---|---|---|---|",
      `| steady connections (-M simple), TPS | ${steady.a.toFixed(0)} | ${steady.b.toFixed(0)} | **${steady.ratio.toFixed(2)}**; ${steady.medianRatio.toFixed(2)} | ≥ 0.8 |`,
      `| a new connection per transaction (-C), TPS | ${perTx.a.toFixed(0)} | ${perTx.b.toFixed(0)} | **${perTx.ratio.toFixed(2)}**; ${perTx.medianRatio.toFixed(2)} | ≥ 5 |`,
      "",
      `- ${IDLE} idle client connections held through the pooler (TLS, each after one SELECT): PgBouncer's RSS ${mib(bouncerBefore)} → ${mib(bouncerIdle)} (${((bouncerIdle - bouncerBefore) / IDLE / 1024).toFixed(1)} KiB per client); the server's processes (PSS, shared buffers once) ${mib(serverBefore)} → ${mib(serverIdle)} with ${backends} processes under the postmaster (the pool, not one backend per client).`,
      `- Trusted sources: direct TPS with a new connection per transaction (-C -M prepared, every connection passing the nftables lookup) with 50 entries listed ${rules.b.toFixed(0)} vs none ${rules.a.toFixed(0)}: ratio **${rules.ratio.toFixed(3)}** (median of rounds ${rules.medianRatio.toFixed(3)}; target ≥ 0.97).`,
      `- The direct port just after the ${IDLE} idle clients left (no entry listed): ${seenAfterIdle.length === 1 ? "admitted at once" : `${seenAfterIdle.length - 1} attempt(s) refused over ${afterIdle.ms} ms (${[...new Set(seenAfterIdle.slice(0, -1))].join("; ")}) before it admitted`}.`,
      `- A change of the list enforced on the published port (from the API's answer to a session from 127.0.0.5 refused or admitted, polled every 200 ms): ${applyMs.map((m) => `${m} ms`).join(", ")} (the promise: within 5 s).`,
      `- Where a new connection's time goes (-C rounds, per connection; CPU from /proc: pgbench with its threads, PgBouncer, the server's processes including those that exited): pgbench's connection time ${cDirect.connectMs.toFixed(1)} ms direct, ${cPooled.connectMs.toFixed(1)} ms pooled; CPU direct — pgbench ${cDirect.clientCpuMs.toFixed(2)} ms, server ${cDirect.serverCpuMs.toFixed(2)} ms (${cDirect.serverSessions.toFixed(2)} server sessions per connection); pooled — pgbench ${cPooled.clientCpuMs.toFixed(2)} ms, PgBouncer ${cPooled.bouncerCpuMs.toFixed(2)} ms, server ${cPooled.serverCpuMs.toFixed(2)} ms (${cPooled.serverSessions.toFixed(3)} server sessions per connection: no server login per client).`,
      "- With `-C` every connection costs a TLS handshake and a SCRAM exchange on both paths (PgBouncer terminates TLS and checks SCRAM against the stored verifier itself); what the pooler saves is the server process's start. The client's own part — its TLS handshake and the SCRAM proof (PBKDF2 over the verifier's iterations, in libpq: one for the passwords we generate, `GENERATED_PASSWORD_SCRAM_ITERATIONS`) — is the same on both paths and, with pgbench on the same two cores, bounds the ratio: (client + server) / (client + PgBouncer + server) of the CPU above, so the ratio follows what a server process's start costs on the host.",
      `- Rounds (TPS): steady ${steady.as.map((x) => x.toFixed(0)).join("/")} direct, ${steady.bs.map((x) => x.toFixed(0)).join("/")} pooled; -C ${perTx.as.map((x) => x.toFixed(0)).join("/")} direct, ${perTx.bs.map((x) => x.toFixed(0)).join("/")} pooled; rules ${rules.as.map((x) => x.toFixed(0)).join("/")} none, ${rules.bs.map((x) => x.toFixed(0)).join("/")} 50.`,
    ].join("\n");
    process.stdout.write(`${body}\n`);
    await writeSection("Pooler and trusted sources (npm run bench:edge)", body);
  } finally {
    // Everything the stack printed, for a closer look at one run (BENCH_EDGE_LOG=<file>).
    if (process.env.BENCH_EDGE_LOG) writeFileSync(process.env.BENCH_EDGE_LOG, stack.output());
    await stack.destroy();
  }
}

runBench(main);
