/**
 * Issue 21, "the control plane scales out": the local stack with
 * LOCAL_REPLICAS=2 — two instances each of gateway, identity, databases and
 * billing, each on its own port, behind the runner's balancer on the
 * service's port (deploy/local/balancer.ts), one agent, Redis shared by the
 * gateways. Writers create, rename, stop and start databases through the
 * public port the whole time, as the fault suite's careful clients do
 * (test/faults/writers.ts). Then, twice — instance 1 of every service, then
 * instance 2 — one instance of each is killed with SIGKILL and held down (the
 * supervisor's hold file): the API must keep answering, the survivors must be
 * the ones serving, the agent must keep getting its work (its watch stream on
 * the surviving databases instance), and at the end no acknowledged write is
 * lost.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { instanceName, localStackLayout, SCALED_SERVICES, type ScaledService } from "@dbaas/kit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { h1Health, h2Health, holdFilePath } from "../../deploy/local/supervisor.ts";
import { checkLedger, createApiClient, Ledger, runWriter, type Api } from "../faults/writers.ts";
import { startStack, type Stack } from "../support/stack.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Bounds of this file's waits (a loaded 2-core machine: generous). */
const START_MS = 360_000;
const SETTLE_MS = 90_000;
const PHASE_MS = 20_000;

let stack: Stack;
let api: Api;
let layout: ReturnType<typeof localStackLayout>;

/** Every answer of the prober, by phase: how the API looked to a client polling it every 200 ms. */
interface ProbeLog {
  ok: number;
  failed: number;
  /** Longest run of failed probes, ms (from the first failure to the next success). */
  longestGapMs: number;
}

async function signup(baseUrl: string): Promise<{ token: string; organizationId: string }> {
  for (;;) {
    const res = await fetch(`${baseUrl}/v1/auth/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        email: `scale-${Date.now()}@example.com`,
        password: "a-long-password",
        name: "Scale",
        organization_name: "Scale",
      }),
    });
    const body = (await res.json()) as any;
    if (res.status === 201) return { token: body.data.access_token, organizationId: body.data.organization.id };
    // A loaded machine may miss the request deadline (scrypt, first connections).
    if (res.status !== 503 && res.status !== 504) throw new Error(`signup: ${res.status} ${JSON.stringify(body)}`);
    await sleep(500);
  }
}

/** The requests an instance has answered so far: its Prometheus counter, summed over every label. */
async function served(service: ScaledService, port: number): Promise<number> {
  const metric = service === "gateway" ? "http_requests_total" : "rpc_requests_total";
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (res.status !== 200) throw new Error(`${service} on ${port}: /metrics answered ${res.status}`);
  let sum = 0;
  for (const line of (await res.text()).split("\n")) {
    if (line.startsWith(`${metric}{`) || line.startsWith(`${metric} `)) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

const healthy = (service: ScaledService, port: number) => (service === "gateway" ? h1Health(port) : h2Health(port));

async function until(what: string, check: () => Promise<boolean>, timeoutMs = SETTLE_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await sleep(250);
  }
}

async function statusOf(id: string): Promise<string | undefined> {
  const got = await api.call("GET", `/v1/databases/${id}`);
  return got.status === 200 ? got.body.data.status : undefined;
}

/** Sends a write until it is answered 2xx (a blip answers 0, 503 or 504: sent again, with its Idempotency-Key). */
async function write(method: string, path: string, body: unknown): Promise<any> {
  const key = `scale-${Math.random()}`;
  const deadline = Date.now() + SETTLE_MS;
  for (;;) {
    const a = await api.call(method, path, body, { "idempotency-key": key });
    if (a.status >= 200 && a.status < 300) return a.body;
    if (![0, 409, 429, 502, 503, 504].includes(a.status) || Date.now() > deadline) {
      throw new Error(`${method} ${path}: ${a.status} ${JSON.stringify(a.body)}`);
    }
    await sleep(250);
  }
}

beforeAll(async () => {
  stack = await startStack({
    agents: "fsn1",
    env: { LOCAL_REPLICAS: "2", REDIS_URL: process.env.REDIS_URL || "redis://127.0.0.1:6379" },
    readyTimeoutMs: START_MS,
  });
  layout = localStackLayout(stack.env);
  const { token, organizationId } = await signup(stack.baseUrl);
  await promisify(execFile)("npm", ["run", "-s", "set-plan", "--", organizationId, "internal"], { env: { ...process.env, ...stack.env } });
  api = createApiClient(stack.baseUrl, token);
  await write("POST", "/v1/billing/payment-methods", { type: "card", token: "tok_visa" });
}, START_MS + 60_000);

let failed = false;
afterEach(({ task }) => {
  if (task.result?.state === "fail") failed = true;
});

afterAll(async () => {
  // What the stack printed, for a failed run (SCALE_OUT_LOG=<file> keeps it for a passing one too).
  const file = process.env.SCALE_OUT_LOG || (failed ? join(tmpdir(), `scale-out-${Date.now()}.log`) : undefined);
  if (stack && file) {
    writeFileSync(file, stack.output());
    process.stdout.write(`scale-out: the stack's output is in ${file}\n`);
  }
  for (const s of SCALED_SERVICES) for (let n = 1; n <= 2; n++) rmSync(holdFilePath(stack.dataDir, instanceName(s, n)), { force: true });
  await stack?.destroy();
}, 120_000);

describe("two instances of each service (LOCAL_REPLICAS=2)", () => {
  it("runs each instance on its own port, and the public port spreads connections over both gateways", async () => {
    expect(stack.output()).toContain("2 instances of each of gateway, identity, databases, billing");
    for (const s of SCALED_SERVICES) {
      expect(layout.instances[s]).toHaveLength(2);
      for (const port of layout.instances[s]) expect(await healthy(s, port)).toBe(true);
    }
    const before = await Promise.all(layout.instances.gateway.map((p) => served("gateway", p)));
    // Concurrent requests open several connections; the balancer hands them out in turn.
    const answers = await Promise.all(Array.from({ length: 16 }, () => api.call("GET", "/v1/organization")));
    expect(answers.map((a) => a.status)).toEqual(Array(16).fill(200));
    const after = await Promise.all(layout.instances.gateway.map((p) => served("gateway", p)));
    expect(after[0]! - before[0]!).toBeGreaterThan(0);
    expect(after[1]! - before[1]!).toBeGreaterThan(0);
  });

  it(
    "loses no acknowledged write and keeps answering while one instance of each is killed (SIGKILL), first instance 1 of every service, then instance 2; the agent is served throughout",
    async () => {
      const ledger = new Ledger();
      let stopping = false;
      const writers = Array.from({ length: 2 }, (_, w) =>
        runWriter(api, ledger, w, { perWriter: 1, region: "fsn1", stopping: () => stopping }),
      );
      // A client polling a read and a write every 200 ms: what it saw of each kill.
      const probes: ProbeLog[] = [];
      let probing: ProbeLog = { ok: 0, failed: 0, longestGapMs: 0 };
      const probeDb = (await write("POST", "/v1/databases", { name: "scale-probe", region: "fsn1", tier: "micro" })).data;
      ledger.acknowledged++;
      ledger.expected.set(probeDb.id, { name: "scale-probe", desired: "running" });
      await until("the probe database running", async () => (await statusOf(probeDb.id)) === "running");
      let renames = 0;
      const prober = (async () => {
        let failingSince: number | undefined;
        while (!stopping) {
          const name = `scale-probe-${++renames}`;
          const read = await api.call("GET", `/v1/databases/${probeDb.id}`);
          const renamed = read.status === 200 ? await api.call("PATCH", `/v1/databases/${probeDb.id}`, { name }) : read;
          if (renamed.status === 200) {
            ledger.acknowledged++;
            ledger.expected.get(probeDb.id)!.name = name;
            probing.ok++;
            if (failingSince !== undefined) probing.longestGapMs = Math.max(probing.longestGapMs, Date.now() - failingSince);
            failingSince = undefined;
          } else {
            // Only what a blip answers: no answer (a connection cut with its instance), 503, 504.
            expect([0, 503, 504]).toContain(renamed.status);
            probing.failed++;
            failingSince ??= Date.now();
          }
          await sleep(200);
        }
      })();
      await sleep(5_000);

      for (const n of [1, 2]) {
        const other = n === 1 ? 2 : 1;
        probing = { ok: 0, failed: 0, longestGapMs: 0 };
        probes.push(probing);
        const survivorsBefore = Object.fromEntries(
          await Promise.all(SCALED_SERVICES.map(async (s) => [s, await served(s, layout.instances[s][other - 1]!)] as const)),
        );
        // Held: the supervisor does not restart it while the file exists, so the survivor alone serves.
        mkdirSync(join(stack.dataDir, "run", "hold"), { recursive: true });
        for (const s of SCALED_SERVICES) {
          const name = instanceName(s, n);
          writeFileSync(holdFilePath(stack.dataDir, name), "");
          process.kill(Number(readFileSync(join(stack.dataDir, "run", `${name}.pid`), "utf8")), "SIGKILL");
        }
        // The agent's work through the surviving databases instance: a new database runs, stops and starts.
        const made = (await write("POST", "/v1/databases", { name: `scale-phase-${n}`, region: "fsn1", tier: "micro" })).data;
        ledger.acknowledged++;
        ledger.expected.set(made.id, { name: `scale-phase-${n}`, desired: "running" });
        await until(`phase ${n}: new database running`, async () => (await statusOf(made.id)) === "running");
        await write("POST", `/v1/databases/${made.id}/stop`, {});
        ledger.acknowledged++;
        ledger.expected.get(made.id)!.desired = "stopped";
        await until(`phase ${n}: database stopped`, async () => (await statusOf(made.id)) === "stopped");
        await write("POST", `/v1/databases/${made.id}/start`, {});
        ledger.acknowledged++;
        ledger.expected.get(made.id)!.desired = "running";
        await until(`phase ${n}: database running again`, async () => (await statusOf(made.id)) === "running");
        // Calls only identity and billing answer: a survivor restarted after the last phase starts its count at 0, and
        // nothing else in a phase has to reach them (the gateways' principal cache answers the writers' tokens).
        for (const path of ["/v1/organization", "/v1/billing/usage"]) {
          await until(`phase ${n}: GET ${path} answered`, async () => (await api.call("GET", path)).status === 200);
        }
        await sleep(PHASE_MS / 4);
        // Every service's survivor answered calls while its twin was down.
        for (const s of SCALED_SERVICES) {
          const now = await served(s, layout.instances[s][other - 1]!);
          expect(now, `${instanceName(s, other)} served while ${instanceName(s, n)} was down`).toBeGreaterThan(survivorsBefore[s]!);
          expect(await healthy(s, layout.instances[s][n - 1]!), `${instanceName(s, n)} is down`).toBe(false);
        }
        // Back: the supervisor restarts them once their hold files go.
        for (const s of SCALED_SERVICES) rmSync(holdFilePath(stack.dataDir, instanceName(s, n)), { force: true });
        for (const s of SCALED_SERVICES) {
          await until(`${instanceName(s, n)} back`, () => healthy(s, layout.instances[s][n - 1]!));
        }
        await sleep(3_000);
      }

      stopping = true;
      await Promise.all([...writers, prober]);
      const final = await checkLedger(api, ledger);
      process.stdout.write(
        `scale-out: ${ledger.acknowledged} acknowledged writes; per phase (ok/failed probes, longest gap ms): ` +
          `${probes.map((p, i) => `instance ${i + 1} down: ${p.ok}/${p.failed}, ${p.longestGapMs}`).join("; ")}\n`,
      );
      expect(final.lost).toEqual([]);
      expect(final.stuck).toEqual([]);
      expect(ledger.anomalies).toEqual([]);
      expect(ledger.acknowledged).toBeGreaterThan(20);
      for (const p of probes) {
        expect(p.ok).toBeGreaterThan(10);
        // A kill cuts the connections its instance held: the requests on them fail once, the next ones go to the twin.
        expect(p.longestGapMs).toBeLessThan(10_000);
      }
    },
    2 * (4 * SETTLE_MS + PHASE_MS) + SETTLE_MS + 120_000,
  );
});
