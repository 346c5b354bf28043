import { create } from "@bufbuild/protobuf";
import { ObservedState, type InstanceObservation, type InstanceSpec, InstanceSpecSchema, DesiredState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAppliedStore, type AppliedStore } from "../src/applied-state.ts";
import type { Reconciler } from "../src/reconciler.ts";
import type { InstanceRuntime } from "../src/runtime.ts";
import {
  freePort,
  instanceSpec,
  query,
  randomPassword,
  reconcilerFor,
  scramVerifier,
  startHost,
  type TestHost,
  waitFor,
} from "./support/fixture.ts";

// The reconciler against the local-process runtime it is given through the
// InstanceRuntime boundary: real instances, real applied-state files.

const ID = "rec1";
const HOST = "db-rec.example.test";

describe("reconciler on the local-process runtime", { timeout: 180_000 }, () => {
  let host: TestHost;
  let runtime: InstanceRuntime;
  let applied: AppliedStore;
  let reconciler: Reconciler;
  let port: number;
  const reports: InstanceObservation[] = [];
  let password = randomPassword();
  let spec: InstanceSpec;

  /** Desires `next` and resolves with the first report that shows it carried out. */
  const converge = (next: Partial<InstanceSpec>, state: ObservedState) => {
    spec = create(InstanceSpecSchema, { ...spec, ...next });
    const from = reports.length;
    reconciler.setDesired([spec]);
    // Generous: the first create builds the template its copies come from (initdb), 30 s and more on a loaded machine.
    return waitFor(
      () =>
        reports
          .slice(from)
          .find(
            (o) =>
              o.databaseId === spec.databaseId &&
              o.state === state &&
              o.observedGeneration === spec.generation &&
              o.appliedCredentialsGeneration === spec.credentialsGeneration,
          ),
      120_000,
      `a ${ObservedState[state]} report of generation ${spec.generation}`,
    );
  };

  beforeAll(async () => {
    host = await startHost("reconciler");
    runtime = host.runtime;
    applied = createAppliedStore(host.dataDir);
    reconciler = reconcilerFor(host, { concurrency: 2, report: (o) => reports.push(o) });
    port = await freePort();
    spec = instanceSpec({ databaseId: ID, port, host: HOST, scramVerifier: scramVerifier(password) });
  }, 60_000);

  afterAll(async () => {
    await reconciler?.drain();
    await host?.close();
  }, 60_000);

  it("the runtime offers the host's versions newest first", () => {
    expect(runtime.versions).toEqual(["17", "16"]);
  });

  it("creates and starts a new instance, reports it running and records the applied generation", async () => {
    await converge({}, ObservedState.RUNNING);
    expect(await query(port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
    expect(await runtime.list()).toEqual([ID]);
    expect(await applied.read(ID)).toEqual({ generation: "1", credentialsGeneration: "1", tier: "micro" });
  });

  it("a new credentials generation sets the password on the running server, without a restart", async () => {
    const before = await runtime.observe(ID);
    const next = randomPassword();
    await converge({ credentialsGeneration: 2n, scramVerifier: scramVerifier(next) }, ObservedState.RUNNING);
    expect((await runtime.observe(ID)).pid).toBe(before.pid);
    await expect(query(port, password, "SELECT 1")).rejects.toThrow(/password authentication failed/);
    password = next;
    expect(await query(port, password, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("a new generation with the same tier restarts the server", async () => {
    const before = await runtime.observe(ID);
    await converge({ generation: 2n }, ObservedState.RUNNING);
    const after = await runtime.observe(ID);
    expect(after.state).toBe("running");
    expect(after.pid).not.toBe(before.pid);
  });

  it("a new generation with another tier resizes: the server runs with that tier's settings", async () => {
    await converge({ generation: 3n, tier: "medium" }, ObservedState.RUNNING);
    expect(await query(port, password, "SELECT current_setting('max_connections') AS mc")).toEqual([{ mc: "200" }]);
    expect((await applied.read(ID))?.tier).toBe("medium");
  });

  it("a postmaster killed with -9 is started again on the next resync, data intact", async () => {
    await query(port, password, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)");
    const before = await runtime.observe(ID);
    process.kill(before.pid!, "SIGKILL");
    await waitFor(async () => ((await runtime.observe(ID)).state === "crashed" ? true : undefined));
    reconciler.resync();
    // Done when customers get in again (the server accepts its socket before logins are admitted).
    const rows = await waitFor(() => query(port, password, "SELECT v FROM kept").catch(() => undefined));
    expect(rows).toEqual([{ v: 42 }]);
    const after = await runtime.observe(ID);
    expect(after).toMatchObject({ state: "running", port });
    expect(after.pid).not.toBe(before.pid);
  });

  it("a postmaster killed with -9 between two heartbeats is noticed by checkServers and started again, no resync", async () => {
    // The last test's start is carried out to its report (customers got in before it ended).
    await reconciler.settled();
    const before = await runtime.observe(ID);
    expect(before.state).toBe("running");
    // Nothing exited: nothing to do.
    expect(reconciler.checkServers()).toBe(0);
    process.kill(before.pid!, "SIGKILL");
    // Its pid is gone (reaped by init) before the check can see it.
    const found = await waitFor(() => reconciler.checkServers() || undefined);
    expect(found).toBe(1);
    const rows = await waitFor(() => query(port, password, "SELECT v FROM kept").catch(() => undefined));
    expect(rows).toEqual([{ v: 42 }]);
    const after = await runtime.observe(ID);
    expect(after).toMatchObject({ state: "running", port });
    expect(after.pid).not.toBe(before.pid);
    // The new server is the one watched now: still running, nothing to do.
    expect(reconciler.checkServers()).toBe(0);
  });

  it("stopped keeps the data; purged removes it and the applied record", async () => {
    await converge({ generation: 4n, desiredState: DesiredState.STOPPED }, ObservedState.STOPPED);
    expect(await runtime.observe(ID)).toEqual({ state: "stopped" });
    await converge({ generation: 5n, desiredState: DesiredState.PURGED }, ObservedState.PURGED);
    expect(await runtime.observe(ID)).toEqual({ state: "absent" });
    expect(await runtime.list()).toEqual([]);
    expect(await applied.read(ID)).toBeUndefined();
  });

  it("an instance whose data vanished is reported failed after three attempts, with the reason", async () => {
    await applied.write("lost1", { generation: "1", credentialsGeneration: "1", tier: "micro" });
    const lost = create(InstanceSpecSchema, { ...spec, databaseId: "lost1", desiredState: DesiredState.RUNNING, generation: 1n });
    const from = reports.length;
    const failed = () => reports.slice(from).find((o) => o.databaseId === "lost1" && o.state === ObservedState.FAILED);
    const steps = reconciler.failedSteps();
    reconciler.setDesired([lost]);
    for (let attempt = 2; attempt <= 3; attempt++) {
      // The previous attempt has failed (and counted) before the next is asked for.
      await waitFor(() => reconciler.failedSteps() === steps + attempt - 1);
      expect(failed()).toBeUndefined();
      reconciler.resync();
    }
    const report = await waitFor(failed);
    expect(report.message).toMatch(/data directory of this database is missing/);
    expect(await runtime.observe("lost1")).toEqual({ state: "absent" });
  });
});
