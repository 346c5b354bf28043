/**
 * `npm run faults`: the fault suite. A local stack (as `npm start` runs it,
 * with a Redis of its own) under writers that create, rename, stop and start
 * databases through the public API, while each process is killed with
 * SIGKILL in turn: gateway, identity, databases, billing, the agent, a
 * customer postmaster, the metadata PostgreSQL and Redis. After each kill
 * the API must answer every kind of request correctly again (a database read
 * and write, a billing read, an identity read) — not only the process come
 * back. It prints the
 * acknowledged writes, lost writes, stuck databases, orphaned postgres
 * processes and the time to correct answers after each kill, and exits 1 when
 * a target is missed (0 lost, 0 stuck, 0 orphans, no 5xx but 503/504, every
 * recovery under 5 s). Not part of `npm test`: it takes a few minutes.
 *
 *   npm run faults [-- --writers 3 --per-writer 2] [-- --replicas 2]
 *
 * `--replicas 2`: the stack with LOCAL_REPLICAS=2 (two instances each of
 * gateway, identity, databases and billing behind the runner's balancer);
 * each instance of each is killed in turn — one of the two at a time, its twin
 * serving meanwhile — before the agent, postmaster, metadata and Redis kills.
 * The table then also says when the API answered correctly again, apart from
 * when the killed instance itself was back, and how many probes missed.
 *
 * FAULTS_TRACE=1 prints every probe after a kill (ms since the kill, what it missed);
 * FAULTS_LOG=<file> keeps what the stack printed; FAULTS_KEEP=1 its data directory (PostgreSQL logs).
 */
import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { instanceName, localStackLayout, SCALED_SERVICES } from "@dbaas/kit";
import { h1Health, h2Health } from "../../deploy/local/supervisor.ts";
import { query } from "../support/pgclient.ts";
import { freePortBlock, startStack, type Stack } from "../support/stack.ts";
import { alive, orphanedPostgres, pidIn, processesUnder, startRedis } from "./processes.ts";
import { checkLedger, createApiClient, Ledger, runWriter, type Api } from "./writers.ts";

const TARGET_MS = 5_000;
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const WRITERS = arg("writers", 3);
const PER_WRITER = arg("per-writer", 2);
const REPLICAS = arg("replicas", 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => process.stdout.write(`[faults ${new Date().toISOString().slice(11, 23)}] ${line}\n`);

interface Fault {
  name: string;
  /** The pid to SIGKILL now. */
  pid: () => number | undefined;
  /** The killed part is serving again (beyond the API answering correctly). */
  back: () => Promise<boolean>;
  /** Work after the kill (Redis is not restarted by the stack: we restart it). */
  after?: () => Promise<void>;
}

interface Result {
  name: string;
  pid: number;
  recoveryMs: number;
  /** From the kill to the first of five correct probes in a row, whether or not the killed process was back yet. */
  answersMs: number;
  /** Probes that missed after the kill, until the five in a row. */
  missedProbes: number;
  orphans: string[];
}

async function signup(baseUrl: string): Promise<{ token: string; organizationId: string }> {
  for (;;) {
    const res = await fetch(`${baseUrl}/v1/auth/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        email: `faults-${Date.now()}@example.com`,
        password: "a-long-password",
        name: "Faults",
        organization_name: "Faults",
      }),
    });
    const body = (await res.json()) as any;
    if (res.status === 201) return { token: body.data.access_token, organizationId: body.data.organization.id };
    // A fresh stack on a loaded machine may miss the request deadline (scrypt, first connections): sign up again.
    if (res.status !== 503 && res.status !== 504) throw new Error(`signup: ${res.status} ${JSON.stringify(body)}`);
    await sleep(500);
  }
}

async function main(): Promise<number> {
  const work = await mkdtemp(join(tmpdir(), "dbaas-faults-"));
  // PostgreSQL runs as an unprivileged user below it: mkdtemp's 0700 would stop it at the door.
  await chmod(work, 0o755);
  const redisPort = await freePortBlock(1);
  let redis = await startRedis(redisPort, work);
  process.env.E2E_LOG_LEVEL ??= "warn";
  log(`redis-server on ${redisPort}; starting the stack in ${work}/stack`);
  let stack: Stack | undefined;
  try {
    stack = await startStack({
      dataDir: join(work, "stack"),
      agents: "fsn1",
      env: {
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        REDIS_KEY_PREFIX: "faults:",
        ...(REPLICAS > 1 ? { LOCAL_REPLICAS: String(REPLICAS) } : {}),
      },
      // Six services boot one after another; on a 2-core machine shared with other jobs that took over 120 s.
      readyTimeoutMs: 360_000,
    });
    const s = stack;
    const layout = localStackLayout(s.env);
    const { token, organizationId } = await signup(s.baseUrl);
    await promisify(execFile)("npm", ["run", "-s", "set-plan", "--", organizationId, "internal"], { env: { ...process.env, ...s.env } });
    const api: Api = createApiClient(s.baseUrl, token);
    const card = await api.call("POST", "/v1/billing/payment-methods", { type: "card", token: "tok_visa" });
    if (card.status !== 201) throw new Error(`payment method: ${card.status}`);

    const ledger = new Ledger();
    const created = await api.call("POST", "/v1/databases", { name: "fault-probe", region: "fsn1", tier: "micro" });
    if (created.status !== 201) throw new Error(`probe database: ${created.status} ${JSON.stringify(created.body)}`);
    const probeDb = created.body.data;
    ledger.acknowledged++;
    ledger.expected.set(probeDb.id, { name: "fault-probe", desired: "running" });
    const instanceDir = join(s.dataDir, "agents", "agent-fsn1", "instances", probeDb.id);

    let probes = 0;
    /** Which answer the last failed probe missed (printed when a recovery is slow). */
    let missedAnswer = "";
    const miss = (what: string, status: number) => {
      missedAnswer = `${what}: ${status === 0 ? "no answer" : status}`;
      return false;
    };
    /**
     * Correct answers from every kind of request the API serves: a database
     * read with the last acknowledged name (databases), a rename (a write),
     * billing's usage (billing), the organization (identity, beyond the
     * authentication every request has), and the instance itself.
     */
    const probe = async (): Promise<boolean> => {
      const got = await api.call("GET", `/v1/databases/${probeDb.id}`);
      if (got.status !== 200 || got.body.data.status !== "running" || got.body.data.name !== ledger.expected.get(probeDb.id)!.name)
        return miss(`database read (${got.body?.data?.status ?? "-"})`, got.status);
      const name = `fault-probe-${++probes}`;
      const renamed = await api.call("PATCH", `/v1/databases/${probeDb.id}`, { name });
      if (renamed.status !== 200) return miss("database write", renamed.status);
      ledger.acknowledged++;
      ledger.expected.get(probeDb.id)!.name = name;
      const usage = await api.call("GET", "/v1/billing/usage");
      if (usage.status !== 200) return miss("billing read", usage.status);
      const organization = await api.call("GET", "/v1/organization");
      if (organization.status !== 200 || organization.body.data.id !== organizationId) return miss("identity read", organization.status);
      try {
        await query(probeDb.connection_string, "SELECT 1");
      } catch {
        return miss("customer database", 0);
      }
      return true;
    };
    const deadline = Date.now() + 60_000;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error("the probe database never answered");
      await sleep(250);
    }

    let stopping = false;
    const writers = Array.from({ length: WRITERS }, (_, w) =>
      runWriter(api, ledger, w, { perWriter: PER_WRITER, region: "fsn1", stopping: () => stopping }),
    );
    log(`${WRITERS} writers × ${PER_WRITER} databases running; warming up`);
    await sleep(8_000);

    const runPid = (name: string) => () => pidIn(join(s.dataDir, "run", `${name}.pid`));
    // One instance at a time (its twins serving meanwhile, with --replicas), each checked on its own port.
    const services: Fault[] = SCALED_SERVICES.flatMap((service) =>
      layout.instances[service].map((port, k) => ({
        name: layout.replicas > 1 ? `${instanceName(service, k + 1)} (${k + 1} of ${layout.replicas})` : service,
        pid: runPid(instanceName(service, k + 1)),
        back: () => (service === "gateway" ? h1Health(port) : h2Health(port)),
      })),
    );
    const faults: Fault[] = [
      ...services,
      { name: "agent", pid: runPid("agent-fsn1"), back: () => h2Health(layout.agents[0]!.port) },
      { name: "customer postmaster", pid: () => pidIn(join(instanceDir, "postmaster.pid")), back: async () => true },
      { name: "metadata PostgreSQL", pid: () => pidIn(join(s.dataDir, "metadata", "postmaster.pid")), back: async () => true },
      {
        name: "Redis",
        pid: () => redis.pid,
        // Nobody restarts our Redis: the gateways must answer correctly without it.
        back: async () => true,
        after: async () => {
          await sleep(3_000);
          redis = await startRedis(redisPort, work);
          const until = Date.now() + 30_000;
          while (Date.now() < until) {
            const h = (await fetch(`${s.baseUrl}/healthz`)
              .then((r) => r.json())
              .catch(() => ({}))) as { redis?: string };
            if (h.redis === "ok") return;
            await sleep(200);
          }
          throw new Error("the gateway did not return to Redis within 30 s");
        },
      },
    ];

    const results: Result[] = [];
    for (const fault of faults) {
      const pid = fault.pid();
      if (pid === undefined || !alive(pid)) throw new Error(`no live ${fault.name} process to kill`);
      log(`kill -9 ${fault.name} (pid ${pid})`);
      const killedAt = Date.now();
      process.kill(pid, "SIGKILL");
      // Recovered at the first correct answer that the next four confirm.
      let firstOk: number | undefined;
      let streak = 0;
      // The API alone (the killed process may still be down): what a client saw.
      let firstAnswer: number | undefined;
      let answers = 0;
      let answersAt: number | undefined;
      let missedProbes = 0;
      while (streak < 5) {
        if (Date.now() - killedAt > 120_000) throw new Error(`${fault.name}: no correct answers 120 s after the kill`);
        const answered = await probe();
        if (answersAt === undefined) {
          if (answered) {
            firstAnswer ??= Date.now();
            if (++answers === 5) answersAt = firstAnswer;
          } else {
            missedProbes++;
            firstAnswer = undefined;
            answers = 0;
          }
        }
        const ok = answered && (await fault.back());
        if (process.env.FAULTS_TRACE)
          log(`  +${Date.now() - killedAt} ms ${ok ? "ok" : answered ? "killed process not back yet" : missedAnswer}`);
        if (ok) {
          firstOk ??= Date.now();
          streak++;
        } else {
          firstOk = undefined;
          streak = 0;
        }
        await sleep(100);
      }
      const recoveryMs = firstOk! - killedAt;
      const answersMs = (answersAt ?? firstOk!) - killedAt;
      // Backends of a killed postmaster take a moment to notice; what is left after 5 s is an orphan.
      let orphans = orphanedPostgres(s.dataDir);
      for (let i = 0; i < 50 && orphans.length > 0; i++) {
        await sleep(100);
        orphans = orphanedPostgres(s.dataDir);
      }
      results.push({ name: fault.name, pid, recoveryMs, answersMs, missedProbes, orphans });
      log(
        `${fault.name}: correct answers after ${recoveryMs} ms${recoveryMs >= TARGET_MS ? ` (last miss: ${missedAnswer})` : ""}` +
          (REPLICAS > 1 ? ` (API answering after ${answersMs} ms, ${missedProbes} probes missed)` : "") +
          `${orphans.length ? `; orphans: ${orphans.join("; ")}` : ""}`,
      );
      await fault.after?.();
      await sleep(3_000);
    }

    log("stopping the writers (each finishes its write)");
    stopping = true;
    await Promise.all(writers);
    const final = await checkLedger(api, ledger);
    log("stopping the stack");
    await s.stop();
    // Everything the stack printed, for a closer look at one run.
    if (process.env.FAULTS_LOG) await writeFile(process.env.FAULTS_LOG, s.output());
    stack = undefined;
    const leftAfterStop = processesUnder(join(work, "stack"));

    const orphanCount = results.reduce((n, r) => n + r.orphans.length, 0) + leftAfterStop.length;
    const slow = results.filter((r) => r.recoveryMs >= TARGET_MS);
    process.stdout.write(
      [
        "",
        ...(REPLICAS > 1
          ? [
              "| process killed (SIGKILL) | time to correct answers (killed process back) | API answering correctly | probes missed | orphaned postgres after |",
              "|---|---|---|---|---|",
              ...results.map(
                (r) =>
                  `| ${r.name} | ${(r.recoveryMs / 1000).toFixed(2)} s | ${(r.answersMs / 1000).toFixed(2)} s | ${r.missedProbes} | ${r.orphans.length} |`,
              ),
            ]
          : [
              "| process killed (SIGKILL) | time to correct answers | orphaned postgres after |",
              "|---|---|---|",
              ...results.map((r) => `| ${r.name} | ${(r.recoveryMs / 1000).toFixed(2)} s | ${r.orphans.length} |`),
            ]),
        "",
        `stack: ${REPLICAS > 1 ? `LOCAL_REPLICAS=${REPLICAS} (each of gateway, identity, databases, billing ${REPLICAS} times)` : "one instance of each service"}`,
        `writers: ${WRITERS} × ${PER_WRITER} databases (plus the probe's renames)`,
        `acknowledged writes: ${ledger.acknowledged}` +
          (ledger.resolvedByReading ? ` (+${ledger.resolvedByReading} settled by reading after a lost answer)` : ""),
        `lost writes: ${final.lost.length}${final.lost.length ? `\n  ${final.lost.join("\n  ")}` : ""}`,
        `stuck databases: ${final.stuck.length}${final.stuck.length ? `\n  ${final.stuck.join("\n  ")}` : ""}`,
        `orphaned postgres processes: ${orphanCount} (after the kills: ${orphanCount - leftAfterStop.length}; after the stack stopped: ${leftAfterStop.length})` +
          (leftAfterStop.length ? `\n  ${leftAfterStop.join("\n  ")}` : ""),
        `5xx other than 503/504, or unsettled writes: ${ledger.anomalies.length}${ledger.anomalies.length ? `\n  ${ledger.anomalies.slice(0, 20).join("\n  ")}` : ""}`,
        `slowest write to settle (retries included): ${(ledger.slowestWriteMs / 1000).toFixed(1)} s (${ledger.slowestWrite}); ` +
          `retries answered 409 "Idempotency-Key still in progress": ${ledger.claimWaits}`,
        `recoveries at or over ${TARGET_MS / 1000} s: ${slow.length ? slow.map((r) => r.name).join(", ") : "none"}`,
        "",
      ].join("\n"),
    );
    const missed = final.lost.length + final.stuck.length + orphanCount + ledger.anomalies.length + slow.length;
    log(missed === 0 ? "every target met" : "TARGETS MISSED");
    return missed === 0 ? 0 : 1;
  } finally {
    if (stack) {
      process.stdout.write(stack.output().slice(-5_000));
      await stack.stop();
    }
    redis.kill("SIGKILL");
    // A stack that failed to start may still be writing there: a failed removal must not hide why the run failed.
    if (!process.env.FAULTS_KEEP) {
      await rm(work, { recursive: true, force: true, maxRetries: 5 }).catch((err: unknown) =>
        process.stderr.write(`could not remove ${work}: ${(err as Error).message}\n`),
      );
    }
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fault suite failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
