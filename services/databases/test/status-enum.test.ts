import { Code } from "@connectrpc/connect";
import { DatabaseStatus } from "@dbaas/proto/databases";
import { ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb, createHarness, expectCode, registerAgent, report, runningDb, violationsOf, type Harness } from "./harness.ts";

/**
 * Issue 11: the status crosses the wire as DatabaseStatus, converted in one
 * place (mappers.ts) from the stored name; the deprecated name still goes
 * beside it and is still read from callers that predate the enum.
 */
let h: Harness;
const AGENT = "enum-a";
const ORG = "org-enum";

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, AGENT, { capacity: 100, ports: [51000, 51099] });
});

afterAll(async () => {
  await h?.close();
});

describe("DatabaseStatus on the wire", () => {
  it("every Database carries the enum and the name of the same status", async () => {
    const { database } = await createDb(h, ORG);
    expect(database).toMatchObject({ status: "provisioning", statusEnum: DatabaseStatus.PROVISIONING });
    await report(h, AGENT, database!.id, ObservedState.RUNNING);
    const got = (await h.dbs.getDatabase({ organizationId: ORG, id: database!.id })).database;
    expect(got).toMatchObject({ status: "running", statusEnum: DatabaseStatus.RUNNING });
    const stopping = (await h.dbs.stopDatabase({ organizationId: ORG, id: database!.id })).database;
    expect(stopping).toMatchObject({ status: "stopping", statusEnum: DatabaseStatus.STOPPING });
  });

  it("lists by status_enum, which wins over the deprecated name; an unknown number is refused", async () => {
    const org = "org-enum-list";
    const running = (await runningDb(h, org, AGENT)).database!;
    const provisioning = (await createDb(h, org)).database!;
    const byEnum = await h.dbs.listDatabases({ organizationId: org, statusEnum: DatabaseStatus.RUNNING, status: "provisioning" });
    expect(byEnum.databases.map((d) => d.id)).toEqual([running.id]);
    const byName = await h.dbs.listDatabases({ organizationId: org, status: "provisioning" });
    expect(byName.databases.map((d) => d.id)).toEqual([provisioning.id]);
    const bad = await expectCode(h.dbs.listDatabases({ organizationId: org, statusEnum: 77 as DatabaseStatus }), Code.InvalidArgument);
    expect(violationsOf(bad)).toEqual([
      { field: "status", message: "must be one of: provisioning, running, starting, stopping, stopped, restarting, resizing, failed" },
    ]);
    // Deleted is a status a record has, not one a list shows.
    await expectCode(h.dbs.listDatabases({ organizationId: org, statusEnum: DatabaseStatus.DELETED }), Code.InvalidArgument);
  });
});
