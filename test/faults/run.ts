/**
 * `npm run faults`: the fault suite. A local stack (as `npm start` runs it,
 * with a Redis of its own) under writers that create, rename, stop and start
 * databases through the public API, while each process is killed with
 * SIGKILL in turn: gateway, identity, databases, billing, the agent, a
 * customer postmaster, the metadata PostgreSQL and Redis. It prints the
 * acknowledged writes, lost writes, stuck databases, orphaned postgres
 * processes and the time to correct answers after each kill, and exits 1 when
 * a target is missed (0 lost, 0 stuck, 0 orphans, no 5xx but 503/504, every
 * recovery under 5 s). Not part of `npm test`: it takes a few minutes.
 *
 *   npm run faults [-- --writers 3 --per-writer 2]
 *
 * FAULTS_LOG=<file> keeps what the stack printed; FAULTS_KEEP=1 its data directory (PostgreSQL logs).
 */
import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { localStackLayout } from "@dbaas/kit";
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
    if (res.status !== 503) throw new Error(`signup: ${res.status} ${JSON.stringify(body)}`);
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
      env: { REDIS_URL: `redis://127.0.0.1:${redisPort}`, REDIS_KEY_PREFIX: "faults:" },
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
    /** Correct answers: a read with the last acknowledged name, a rename, billing's usage, and the instance itself. */
    const probe = async (): Promise<boolean> => {
      const got = await api.call("GET", `/v1/databases/${probeDb.id}`);
      if (got.status !== 200 || got.body.data.status !== "running" || got.body.data.name !== ledger.expected.get(probeDb.id)!.name)
        return false;
      const name = `fault-probe-${++probes}`;
      const renamed = await api.call("PATCH", `/v1/databases/${probeDb.id}`, { name });
      if (renamed.status !== 200) return false;
      ledger.acknowledged++;
      ledger.expected.get(probeDb.id)!.name = name;
      if ((await api.call("GET", "/v1/billing/usage")).status !== 200) return false;
      try {
        await query(probeDb.connection_string, "SELECT 1");
      } catch {
        return false;
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
    const faults: Fault[] = [
      { name: "gateway", pid: runPid("gateway"), back: () => h1Health(layout.gateway) },
      { name: "identity", pid: runPid("identity"), back: () => h2Health(layout.identity) },
      { name: "databases", pid: runPid("databases"), back: () => h2Health(layout.databases) },
      { name: "billing", pid: runPid("billing"), back: () => h2Health(layout.billing) },
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
      while (streak < 5) {
        if (Date.now() - killedAt > 120_000) throw new Error(`${fault.name}: no correct answers 120 s after the kill`);
        const ok = (await probe()) && (await fault.back());
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
      // Backends of a killed postmaster take a moment to notice; what is left after 5 s is an orphan.
      let orphans = orphanedPostgres(s.dataDir);
      for (let i = 0; i < 50 && orphans.length > 0; i++) {
        await sleep(100);
        orphans = orphanedPostgres(s.dataDir);
      }
      results.push({ name: fault.name, pid, recoveryMs, orphans });
      log(`${fault.name}: correct answers after ${recoveryMs} ms${orphans.length ? `; orphans: ${orphans.join("; ")}` : ""}`);
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
        "| process killed (SIGKILL) | time to correct answers | orphaned postgres after |",
        "|---|---|---|",
        ...results.map((r) => `| ${r.name} | ${(r.recoveryMs / 1000).toFixed(2)} s | ${r.orphans.length} |`),
        "",
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
    if (!process.env.FAULTS_KEEP) await rm(work, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fault suite failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
