import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { DesiredState, ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createDb,
  createHarness,
  expectCode,
  registerAgent,
  report,
  runningDb,
  specOf,
  statusOf,
  uniqueName,
  violationsOf,
  type Harness,
} from "./harness.ts";

let h: Harness;
const AGENT = "life-a";
const ORG = "org-life";

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, AGENT, { capacity: 1000, ports: [50000, 50999] });
});

afterAll(async () => {
  await h?.close();
});

/** A stopped database, reached the way users reach it. */
async function stoppedDb(org = ORG) {
  const { database } = await runningDb(h, org, AGENT);
  await h.dbs.stopDatabase({ organizationId: org, id: database!.id });
  await report(h, AGENT, database!.id, ObservedState.STOPPED);
  expect(await statusOf(h, org, database!.id)).toBe("stopped");
  return database!.id;
}

async function failedDb(org = ORG) {
  const { database } = await runningDb(h, org, AGENT);
  await report(h, AGENT, database!.id, ObservedState.FAILED, { message: "disk full" });
  return database!.id;
}

describe("agent reports", () => {
  it("move provisioning to running only for the current generation", async () => {
    const { database } = await createDb(h, ORG);
    const id = database!.id;
    // Work under way changes nothing.
    await report(h, AGENT, id, ObservedState.PROGRESSING);
    expect(await statusOf(h, ORG, id)).toBe("provisioning");
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, id)).toBe("running");
    // Its first backup started as it first ran (backups.test.ts): the create is the operation before it.
    const [backup, op] = (await h.dbs.listOperations({ organizationId: ORG, databaseId: id })).operations;
    expect(backup).toMatchObject({ type: "backup", status: "running" });
    expect(op).toMatchObject({ type: "create", status: "succeeded", error: "" });
    expect(op!.finishedAt).toBeDefined();
  });

  it("ignore an observation of an older generation", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const id = database!.id;
    const before = await specOf(h, AGENT, id);
    await h.dbs.restartDatabase({ organizationId: ORG, id });
    const after = await specOf(h, AGENT, id);
    expect(after!.generation).toBe(before!.generation + 1n);
    // The instance was running before the restart: that says nothing about the restart.
    await report(h, AGENT, id, ObservedState.RUNNING, { generation: before!.generation });
    expect(await statusOf(h, ORG, id)).toBe("restarting");
    await report(h, AGENT, id, ObservedState.RUNNING, { generation: after!.generation });
    expect(await statusOf(h, ORG, id)).toBe("running");
  });

  it("from another agent are ignored", async () => {
    await registerAgent(h, "life-intruder", { regions: ["hel1"] });
    const { database } = await createDb(h, ORG);
    await h.agents.reportInstances({
      agentId: "life-intruder",
      instances: [{ databaseId: database!.id, state: ObservedState.RUNNING, observedGeneration: 99n, appliedCredentialsGeneration: 99n }],
    });
    expect(await statusOf(h, ORG, database!.id)).toBe("provisioning");
  });

  it("from an unregistered agent are refused", async () => {
    await expectCode(h.agents.reportInstances({ agentId: "nobody", instances: [] }), Code.NotFound);
  });

  it("FAILED marks the database failed with the reason and fails the operation; a later RUNNING heals it", async () => {
    const { database } = await createDb(h, ORG);
    const id = database!.id;
    await report(h, AGENT, id, ObservedState.FAILED, { message: "initdb: out of disk space" });
    const failed = (await h.dbs.getDatabase({ organizationId: ORG, id })).database!;
    expect(failed).toMatchObject({ status: "failed", statusReason: "initdb: out of disk space" });
    const [op] = (await h.dbs.listOperations({ organizationId: ORG, databaseId: id })).operations;
    expect(op).toMatchObject({ type: "create", status: "failed", error: "initdb: out of disk space" });

    // The same failure reported again is not a new status change.
    await report(h, AGENT, id, ObservedState.FAILED, { message: "initdb: out of disk space" });
    const events = await h.ctx.pool.query("SELECT payload->>'status' AS s FROM outbox WHERE payload->>'database_id' = $1 ORDER BY id", [
      id,
    ]);
    expect(events.rows.map((r) => r.s)).toEqual(["provisioning", "failed"]);

    await report(h, AGENT, id, ObservedState.RUNNING);
    expect((await h.dbs.getDatabase({ organizationId: ORG, id })).database).toMatchObject({ status: "running", statusReason: "" });
  });

  it("FAILED without a message still gives a reason", async () => {
    const { database } = await createDb(h, ORG);
    await report(h, AGENT, database!.id, ObservedState.FAILED);
    expect((await h.dbs.getDatabase({ organizationId: ORG, id: database!.id })).database!.statusReason).toBe("the instance failed");
  });
});

describe("transitions", () => {
  it("stop → stopping → stopped, start → starting → running", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const id = database!.id;
    const stopping = await h.dbs.stopDatabase({ organizationId: ORG, id });
    expect(stopping.database).toMatchObject({ id, status: "stopping" });
    expect((await specOf(h, AGENT, id))!.desiredState).toBe(DesiredState.STOPPED);
    // Still running as far as the agent has seen: no change.
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, id)).toBe("stopping");
    await report(h, AGENT, id, ObservedState.STOPPED);
    expect(await statusOf(h, ORG, id)).toBe("stopped");

    const starting = await h.dbs.startDatabase({ organizationId: ORG, id });
    expect(starting.database!.status).toBe("starting");
    expect((await specOf(h, AGENT, id))!.desiredState).toBe(DesiredState.RUNNING);
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, id)).toBe("running");
  });

  it("resize a running database: resizing with the new tier, back to running", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const id = database!.id;
    const res = await h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "large" });
    expect(res.database).toMatchObject({ status: "resizing", tier: "large" });
    expect(await specOf(h, AGENT, id)).toMatchObject({ tier: "large", desiredState: DesiredState.RUNNING });
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect((await h.dbs.getDatabase({ organizationId: ORG, id })).database).toMatchObject({ status: "running", tier: "large" });
  });

  it("resize a stopped database: resizing, back to stopped", async () => {
    const id = await stoppedDb();
    await h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "medium" });
    expect(await specOf(h, AGENT, id)).toMatchObject({ tier: "medium", desiredState: DesiredState.STOPPED });
    await report(h, AGENT, id, ObservedState.STOPPED);
    expect((await h.dbs.getDatabase({ organizationId: ORG, id })).database).toMatchObject({ status: "stopped", tier: "medium" });
  });

  it("resize to the same or an unknown tier is a validation error on tier", async () => {
    const { database } = await runningDb(h, ORG, AGENT, { tier: "small" });
    const same = await expectCode(h.dbs.resizeDatabase({ organizationId: ORG, id: database!.id, tier: "small" }), Code.InvalidArgument);
    expect(violationsOf(same)).toEqual([{ field: "tier", message: "is already small" }]);
    const unknown = await expectCode(h.dbs.resizeDatabase({ organizationId: ORG, id: database!.id, tier: "jumbo" }), Code.InvalidArgument);
    expect(violationsOf(unknown)).toEqual([{ field: "tier", message: "must be one of: micro, small, medium, large, xlarge" }]);
    expect(await statusOf(h, ORG, database!.id)).toBe("running");
  });

  it("restart, start and stop are allowed from failed", async () => {
    for (const op of ["restartDatabase", "startDatabase", "stopDatabase"] as const) {
      const id = await failedDb();
      const res = await h.dbs[op]({ organizationId: ORG, id });
      expect(res.database!.status).toBe({ restartDatabase: "restarting", startDatabase: "starting", stopDatabase: "stopping" }[op]);
    }
  });

  type Op = "start" | "stop" | "restart" | "resize";
  const call = (op: Op, id: string) =>
    op === "resize"
      ? h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "xlarge" })
      : h.dbs[`${op}Database`]({ organizationId: ORG, id });

  const setups: Record<string, () => Promise<string>> = {
    provisioning: async () => (await createDb(h, ORG)).database!.id,
    running: async () => (await runningDb(h, ORG, AGENT)).database!.id,
    stopped: () => stoppedDb(),
    stopping: async () => {
      const { database } = await runningDb(h, ORG, AGENT);
      await h.dbs.stopDatabase({ organizationId: ORG, id: database!.id });
      return database!.id;
    },
    restarting: async () => {
      const { database } = await runningDb(h, ORG, AGENT);
      await h.dbs.restartDatabase({ organizationId: ORG, id: database!.id });
      return database!.id;
    },
    failed: () => failedDb(),
  };

  it.each<[Op, string]>([
    ["start", "provisioning"],
    ["start", "running"],
    ["start", "stopping"],
    ["stop", "provisioning"],
    ["stop", "stopped"],
    ["stop", "restarting"],
    ["restart", "stopped"],
    ["restart", "provisioning"],
    ["resize", "provisioning"],
    ["resize", "stopping"],
    ["resize", "failed"],
  ])("refuses %s from %s with FAILED_PRECONDITION naming the status, changing nothing", async (op, from) => {
    const id = await setups[from]!();
    const before = await specOf(h, AGENT, id);
    const err = await expectCode(call(op, id), Code.FailedPrecondition);
    expect(err.rawMessage).toBe(`cannot ${op} a database that is ${from}`);
    expect(await statusOf(h, ORG, id)).toBe(from);
    expect((await specOf(h, AGENT, id))!.generation).toBe(before!.generation);
  });
});

describe("operations", () => {
  it("lists every operation newest first, with outcome and errors", async () => {
    const { database } = await createDb(h, ORG);
    const id = database!.id;
    await report(h, AGENT, id, ObservedState.RUNNING);
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.STOPPED);
    await h.dbs.startDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.FAILED, { message: "could not bind port" });
    await h.dbs.restartDatabase({ organizationId: ORG, id });

    const { operations, total, page, perPage } = await h.dbs.listOperations({ organizationId: ORG, databaseId: id });
    expect({ total, page, perPage }).toEqual({ total: 4, page: 1, perPage: 20 });
    expect(operations.map((o) => [o.type, o.status, o.error])).toEqual([
      ["restart", "running", ""],
      ["start", "failed", "could not bind port"],
      ["stop", "succeeded", ""],
      ["create", "succeeded", ""],
    ]);
    expect(operations.every((o) => o.databaseId === id && o.id.startsWith("op"))).toBe(true);
    const started = operations.map((o) => timestampDate(o.startedAt!).getTime());
    expect([...started].sort((a, b) => b - a)).toEqual(started);
    expect(operations[0]!.finishedAt).toBeUndefined();

    const second = await h.dbs.listOperations({ organizationId: ORG, databaseId: id, page: 2, perPage: 3 });
    expect(second.operations.map((o) => o.type)).toEqual(["create"]);
    expect(second.total).toBe(4);

    const bad = await expectCode(
      h.dbs.listOperations({ organizationId: ORG, databaseId: id, page: -1, perPage: 101 }),
      Code.InvalidArgument,
    );
    expect(violationsOf(bad).map((v) => v.field)).toEqual(["page", "per_page"]);
  });

  it("marks an operation still waiting as superseded when a newer one starts", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    await h.dbs.restartDatabase({ organizationId: ORG, id: database!.id });
    await h.dbs.deleteDatabase({ organizationId: ORG, id: database!.id });
    const { rows } = await h.ctx.pool.query("SELECT type, status, error FROM operations WHERE database_id = $1 ORDER BY started_at DESC", [
      database!.id,
    ]);
    expect(rows).toEqual([
      { type: "delete", status: "running", error: "" },
      { type: "restart", status: "failed", error: "superseded by a newer operation" },
      { type: "create", status: "succeeded", error: "" },
    ]);
  });
});

describe("list, rename and organization isolation", () => {
  it("lists an organization's databases newest first, filtered and paged", async () => {
    const org = "org-list";
    const a = (await runningDb(h, org, AGENT, { name: "list-a" })).database!;
    const b = (await createDb(h, org, { name: "list-b" })).database!;
    await registerAgent(h, "life-nbg", { regions: ["nbg1"] });
    const c = (await createDb(h, org, { name: "list-c", region: "nbg1" })).database!;
    await createDb(h, "org-list-other");

    const all = await h.dbs.listDatabases({ organizationId: org });
    expect(all.databases.map((d) => d.id)).toEqual([c.id, b.id, a.id]);
    expect(all).toMatchObject({ total: 3, page: 1, perPage: 20 });
    expect((await h.dbs.listDatabases({ organizationId: org, status: "running" })).databases.map((d) => d.id)).toEqual([a.id]);
    expect((await h.dbs.listDatabases({ organizationId: org, region: "nbg1" })).databases.map((d) => d.id)).toEqual([c.id]);
    const page2 = await h.dbs.listDatabases({ organizationId: org, page: 2, perPage: 2 });
    expect(page2.databases.map((d) => d.id)).toEqual([a.id]);
    expect(page2.total).toBe(3);

    const bad = await expectCode(
      h.dbs.listDatabases({ organizationId: org, page: -2, perPage: 101, status: "sleeping", region: "mars" }),
      Code.InvalidArgument,
    );
    expect(violationsOf(bad).map((v) => v.field)).toEqual(["page", "per_page", "status", "region"]);
  });

  it("renames, refusing a taken or invalid name", async () => {
    const a = (await createDb(h, ORG, { name: uniqueName("ren") })).database!;
    const b = (await createDb(h, ORG, { name: uniqueName("ren") })).database!;
    const renamed = await h.dbs.updateDatabase({ organizationId: ORG, id: a.id, name: "  renamed-one " });
    expect(renamed.database!.name).toBe("renamed-one");
    await expectCode(h.dbs.updateDatabase({ organizationId: ORG, id: b.id, name: "RENAMED-ONE" }), Code.AlreadyExists);
    const err = await expectCode(h.dbs.updateDatabase({ organizationId: ORG, id: b.id, name: "x" }), Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([{ field: "name", message: "must be 3-63 characters long" }]);
    // A change of case only is the same database keeping its name.
    expect((await h.dbs.updateDatabase({ organizationId: ORG, id: a.id, name: "Renamed-One" })).database!.name).toBe("Renamed-One");
  });

  it("answers NOT_FOUND to another organization for every RPC, and changes nothing", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const id = database!.id;
    const before = await specOf(h, AGENT, id);
    const intruder = "org-intruder";
    const calls: [string, () => Promise<unknown>][] = [
      ["get", () => h.dbs.getDatabase({ organizationId: intruder, id })],
      ["update", () => h.dbs.updateDatabase({ organizationId: intruder, id, name: "stolen" })],
      ["start", () => h.dbs.startDatabase({ organizationId: intruder, id })],
      ["stop", () => h.dbs.stopDatabase({ organizationId: intruder, id })],
      ["restart", () => h.dbs.restartDatabase({ organizationId: intruder, id })],
      ["resize", () => h.dbs.resizeDatabase({ organizationId: intruder, id, tier: "large" })],
      ["reset-password", () => h.dbs.resetPassword({ organizationId: intruder, id })],
      ["operations", () => h.dbs.listOperations({ organizationId: intruder, databaseId: id })],
      ["ca", () => h.dbs.getCaCertificate({ organizationId: intruder, id })],
      ["delete", () => h.dbs.deleteDatabase({ organizationId: intruder, id })],
    ];
    for (const [what, fn] of calls) {
      const err = await expectCode(fn(), Code.NotFound).catch((e: Error) => {
        throw new Error(`${what}: ${e.message}`);
      });
      expect(err.rawMessage, what).toBe("database not found");
    }
    expect((await h.dbs.listDatabases({ organizationId: intruder })).databases.map((d) => d.id)).not.toContain(id);
    expect((await h.dbs.getDatabase({ organizationId: ORG, id })).database).toMatchObject({ status: "running", name: database!.name });
    expect((await specOf(h, AGENT, id))!.generation).toBe(before!.generation);
  });

  it("answers NOT_FOUND for an unknown id", async () => {
    await expectCode(h.dbs.getDatabase({ organizationId: ORG, id: "db-doesnotexist" }), Code.NotFound);
    await expectCode(h.dbs.stopDatabase({ organizationId: ORG, id: "db-doesnotexist" }), Code.NotFound);
  });
});
