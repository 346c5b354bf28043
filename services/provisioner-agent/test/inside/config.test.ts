import { spawn } from "node:child_process";
import { readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { DesiredState, type InstanceObservation, type InstanceSpec, InstanceSpecSchema, ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Reconciler } from "../../src/reconciler.ts";
import {
  freePort,
  instanceSpec,
  query,
  randomPassword,
  reconcilerFor,
  scramVerifier,
  startHost,
  startInstance,
  type TestHost,
  waitFor,
} from "../support/fixture.ts";
import { adminClient } from "./support.ts";

// The customer's configuration overrides through the reconciler on a real server: written before a start,
// applied with ALTER SYSTEM and a reload while it runs (restart-only ones reported pending until a restart),
// kept across stop/start, restart and resize, and preloaded pg_stat_statements — on a server an older agent
// configured without it too, from its next restart.

const ID = "conf1";

describe("configuration overrides on a real server", { timeout: 120_000 }, () => {
  let host: TestHost;
  let reconciler: Reconciler;
  let port: number;
  const password = randomPassword();
  const reports: InstanceObservation[] = [];
  let spec: InstanceSpec;

  /** Desires `next` and resolves with the first report of it in `state` with its configuration applied. */
  const converge = (next: Partial<InstanceSpec>, state = ObservedState.RUNNING) => {
    spec = create(InstanceSpecSchema, { ...spec, ...next });
    const from = reports.length;
    reconciler.setDesired([spec]);
    return waitFor(
      () =>
        reports
          .slice(from)
          .find(
            (o) => o.state === state && o.observedGeneration === spec.generation && o.appliedConfigGeneration === spec.configGeneration,
          ),
      90_000,
      "configuration applied",
    );
  };
  /** A setting as a new customer session sees it. */
  const show = async (name: string) => (await query(port, password, `SELECT current_setting('${name}') AS v`))[0]!.v;

  beforeAll(async () => {
    host = await startHost("config");
    reconciler = reconcilerFor(host, { report: (o) => reports.push(o) });
    port = await freePort();
    spec = instanceSpec({ databaseId: ID, port, scramVerifier: scramVerifier(password) });
  }, 60_000);

  afterAll(async () => {
    await reconciler?.drain();
    await host?.close();
  }, 60_000);

  it("a new server starts with its overrides (they outrank the tier's settings) and pg_stat_statements preloaded", async () => {
    const tierWorkMem = await (async () => {
      const obs = await converge({ parameters: { statement_timeout: "7000ms" }, configGeneration: 1n });
      expect(obs.pendingRestart).toEqual([]);
      return show("work_mem");
    })();
    expect(await show("statement_timeout")).toBe("7s");
    // Customers may not read it; the agent may.
    expect(await host.asAgent(ID, "SHOW shared_preload_libraries")).toEqual([{ shared_preload_libraries: "pg_stat_statements" }]);
    expect(await show("timezone")).toBe("UTC");
    const auto = await readFile(path.join(host.dataDir, "instances", ID, "postgresql.auto.conf"), "utf8");
    expect(auto).toContain("statement_timeout = '7000ms'");
    expect(tierWorkMem).not.toBe("64MB");
  });

  it("a change is applied by a reload, visible in a new session; a restart-only one is pending until a restart", async () => {
    const pid = await host.postmasterPid(ID);
    const obs = await converge({
      parameters: { work_mem: "65536kB", statement_timeout: "5000ms", max_connections: "40" },
      configGeneration: 2n,
    });
    expect(obs.pendingRestart).toEqual(["max_connections"]);
    expect(await host.postmasterPid(ID)).toBe(pid);
    expect(await show("work_mem")).toBe("64MB");
    expect(await show("statement_timeout")).toBe("5s");
    expect(await show("max_connections")).toBe("50");
    const restarted = await converge({ generation: spec.generation + 1n });
    expect(restarted.pendingRestart).toEqual([]);
    expect(await show("max_connections")).toBe("40");
    expect(await show("work_mem")).toBe("64MB");
  });

  it("an override removed gives the tier's value back, at once", async () => {
    await converge({ parameters: { work_mem: "65536kB", max_connections: "40" }, configGeneration: 3n });
    expect(await show("statement_timeout")).toBe("0");
    const auto = await readFile(path.join(host.dataDir, "instances", ID, "postgresql.auto.conf"), "utf8");
    expect(auto).not.toContain("statement_timeout");
  });

  it("survives a stop (a change while stopped is applied at the start), a resize and an agent restart", async () => {
    await converge({ desiredState: DesiredState.STOPPED, generation: spec.generation + 1n }, ObservedState.STOPPED);
    const stopped = await converge(
      { parameters: { work_mem: "32768kB", max_connections: "30" }, configGeneration: 4n },
      ObservedState.STOPPED,
    );
    expect(stopped.pendingRestart).toEqual([]);
    await converge({ desiredState: DesiredState.RUNNING, generation: spec.generation + 1n });
    expect(await show("work_mem")).toBe("32MB");
    expect(await show("max_connections")).toBe("30");
    await converge({ tier: "small", generation: spec.generation + 1n });
    expect(await show("work_mem")).toBe("32MB");
    expect(await show("max_connections")).toBe("30");
    // A new agent process knows nothing applied: it applies again (idempotent) and reports it.
    await reconciler.drain();
    reports.length = 0;
    reconciler = reconcilerFor(host, { report: (o) => reports.push(o) });
    const again = await converge({});
    expect(again.appliedConfigGeneration).toBe(4n);
    expect(await show("work_mem")).toBe("32MB");
  });

  it("a runtime refuses a parameter name that is not one (nothing reaches ALTER SYSTEM)", async () => {
    await expect(host.runtime.setParameters(ID, { "work_mem = '1MB'; --": "x" })).rejects.toThrow(/invalid parameter name/);
  });
});

describe("pg_stat_statements on a server an older agent configured without it", { timeout: 180_000 }, () => {
  const id = "conf2";
  let host: TestHost;

  beforeAll(async () => {
    host = await startHost("confold");
  }, 60_000);

  afterAll(() => host?.close(), 60_000);

  /** PostgreSQL's own restart of the server (pg_ctl as its user, with the data directory's files as they are): no agent code. */
  async function restartOutsideTheAgent(dir: string): Promise<void> {
    const opts = await readFile(path.join(dir, "postmaster.opts"), "utf8");
    const postgres = /^(\S+)/.exec(opts)![1]!.replace(/^"|"$/g, "");
    const owner = await stat(dir);
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(path.join(path.dirname(postgres), "pg_ctl"), ["-D", dir, "-m", "fast", "-w", "-t", "60", "restart"], {
        uid: owner.uid,
        gid: owner.gid,
        cwd: dir,
        // The postmaster inherits these: nothing may hold a pipe to this test.
        stdio: "ignore",
      });
      child.once("error", reject);
      child.once("exit", resolve);
    });
    expect(code, "pg_ctl restart").toBe(0);
  }

  it("gets the preload at its next restart: query statistics answer there, with CREATE EXTENSION in postgres", async () => {
    const inst = await startInstance(host, id);
    const admin = adminClient(host.runtime);
    const dir = path.join(host.dataDir, "instances", id);
    // dbaas.conf as an agent from before query insights wrote it: no preload (nor its settings), the server restarted with it.
    const conf = path.join(dir, "dbaas.conf");
    const current = await readFile(conf, "utf8");
    const older = current
      .split("\n")
      .filter((l) => !/^(shared_preload_libraries|pg_stat_statements\.)/.test(l))
      .join("\n");
    expect(older).not.toBe(current);
    await writeFile(conf, older);
    await restartOutsideTheAgent(dir);
    expect(await host.asAgent(id, "SHOW shared_preload_libraries")).toEqual([{ shared_preload_libraries: "" }]);
    await expect(admin.listQueryStats({ databaseId: id, orderBy: "calls", limit: 5 })).rejects.toThrow(/shared_preload_libraries/);

    // Its next restart (a restart asked for, a resize, a start after a stop: each writes dbaas.conf anew).
    await host.runtime.restart(id, inst.settings);
    expect(await readFile(conf, "utf8")).toMatch(/^shared_preload_libraries = 'pg_stat_statements'$/m);
    expect(await host.asAgent(id, "SHOW shared_preload_libraries")).toEqual([{ shared_preload_libraries: "pg_stat_statements" }]);
    for (let i = 0; i < 7; i++) await query(inst.port, inst.password, `SELECT ${i} + 1 AS n /* conf2 */`);
    const { stats } = await waitFor(async () => {
      const r = await admin.listQueryStats({ databaseId: id, orderBy: "calls", limit: 100 });
      return r.stats.some((s) => s.query.includes("conf2")) && r;
    }, 60_000);
    expect(stats.find((s) => s.query.includes("conf2"))).toMatchObject({ user: "dbadmin", database: "defaultdb" });
    expect(await host.asAgent(id, "SELECT extname FROM pg_extension WHERE extname = 'pg_stat_statements'")).toEqual([
      { extname: "pg_stat_statements" },
    ]);
  });
});
