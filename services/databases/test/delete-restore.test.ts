import { Code } from "@connectrpc/connect";
import { DesiredState, ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepExpiredDeletions } from "../src/background.ts";
import {
  createDb,
  createHarness,
  expectCode,
  registerAgent,
  report,
  runningDb,
  snapshot,
  specOf,
  statusOf,
  uniqueName,
  type Harness,
} from "./harness.ts";

let h: Harness;
const AGENT = "del-agent";
const ORG = "org-del";

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, AGENT, { capacity: 100, ports: [55000, 55099] });
});

afterAll(async () => {
  await h?.close();
});

/** Moves a deleted database's retention window into the past, as if 7 days had gone by. */
async function expireRetention(id: string): Promise<void> {
  await h.ctx.pool.query("UPDATE databases SET purge_after = now() - interval '1 second' WHERE id = $1", [id]);
}

describe("DeleteDatabase", () => {
  it("hides the database, frees its name and tells the agent to stop and keep the data", async () => {
    const { database } = await runningDb(h, ORG, AGENT, { name: "to-delete" });
    const id = database!.id;
    const before = await specOf(h, AGENT, id);
    await h.dbs.deleteDatabase({ organizationId: ORG, id });

    await expectCode(h.dbs.getDatabase({ organizationId: ORG, id }), Code.NotFound);
    await expectCode(h.dbs.listOperations({ organizationId: ORG, databaseId: id }), Code.NotFound);
    await expectCode(h.dbs.deleteDatabase({ organizationId: ORG, id }), Code.NotFound);
    expect((await h.dbs.listDatabases({ organizationId: ORG })).databases.map((d) => d.id)).not.toContain(id);

    const spec = await specOf(h, AGENT, id);
    expect(spec).toMatchObject({ desiredState: DesiredState.DELETED, port: before!.port });
    expect(spec!.generation).toBe(before!.generation + 1n);

    const { rows } = await h.ctx.pool.query(
      "SELECT status, deleted_at IS NOT NULL AS deleted, purge_after - deleted_at AS retention FROM databases WHERE id = $1",
      [id],
    );
    expect(rows[0]).toMatchObject({ status: "deleted", deleted: true });
    expect(rows[0].retention).toMatchObject({ days: 7 });
    const events = await h.ctx.pool.query("SELECT payload->>'status' AS s FROM outbox WHERE payload->>'database_id' = $1 ORDER BY id", [
      id,
    ]);
    expect(events.rows.map((r) => r.s)).toEqual(["provisioning", "running", "deleted"]);

    // The name is free for a new database at once.
    expect((await createDb(h, ORG, { name: "to-delete" })).database!.name).toBe("to-delete");

    // The agent stopping the instance settles the delete operation without resurrecting it.
    await report(h, AGENT, id, ObservedState.STOPPED);
    const op = await h.ctx.pool.query("SELECT status FROM operations WHERE database_id = $1 AND type = 'delete'", [id]);
    expect(op.rows[0].status).toBe("succeeded");
    expect((await h.ctx.pool.query("SELECT status FROM databases WHERE id = $1", [id])).rows[0].status).toBe("deleted");
  });

  it("is allowed from a transitional status", async () => {
    const { database } = await createDb(h, ORG);
    await h.dbs.deleteDatabase({ organizationId: ORG, id: database!.id });
    // A failure reported for a deleted database does not bring it back as failed.
    await report(h, AGENT, database!.id, ObservedState.FAILED, { message: "late failure" });
    expect((await h.ctx.pool.query("SELECT status FROM databases WHERE id = $1", [database!.id])).rows[0].status).toBe("deleted");
  });
});

describe("RestoreDatabase", () => {
  it("is refused to every caller but support", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    await h.dbs.deleteDatabase({ organizationId: ORG, id: database!.id });
    await expectCode(h.dbs.restoreDatabase({ id: database!.id }), Code.PermissionDenied);
    await expectCode(h.dbsAs("gateway").restoreDatabase({ id: database!.id }), Code.PermissionDenied);
    await expectCode(h.dbs.getDatabase({ organizationId: ORG, id: database!.id }), Code.NotFound);
  });

  it("brings a deleted database back for support, starting it again", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const id = database!.id;
    await h.dbs.deleteDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.STOPPED);

    const restored = await h.dbsAs("support").restoreDatabase({ id });
    expect(restored.database).toMatchObject({ id, name: database!.name, organizationId: ORG, status: "starting", port: database!.port });
    expect((await specOf(h, AGENT, id))!.desiredState).toBe(DesiredState.RUNNING);
    expect((await h.dbs.listDatabases({ organizationId: ORG })).databases.map((d) => d.id)).toContain(id);

    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, id)).toBe("running");
    const ops = await h.dbs.listOperations({ organizationId: ORG, databaseId: id });
    // The lifecycle's operations; the first run also started the first backup (backups.test.ts).
    expect(ops.operations.filter((o) => o.type !== "backup").map((o) => [o.type, o.status])).toEqual([
      ["restore", "succeeded"],
      ["delete", "succeeded"],
      ["create", "succeeded"],
    ]);
  });

  it("is a conflict when a live database has taken the name, changing nothing", async () => {
    const name = uniqueName("taken");
    const { database } = await runningDb(h, ORG, AGENT, { name });
    await h.dbs.deleteDatabase({ organizationId: ORG, id: database!.id });
    await createDb(h, ORG, { name: name.toUpperCase() });
    const err = await expectCode(h.dbsAs("support").restoreDatabase({ id: database!.id }), Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/same name; rename it first/);
    expect((await specOf(h, AGENT, database!.id))!.desiredState).toBe(DesiredState.DELETED);
    await expectCode(h.dbs.getDatabase({ organizationId: ORG, id: database!.id }), Code.NotFound);
  });

  it("answers NOT_FOUND for a live or unknown database", async () => {
    const { database } = await createDb(h, ORG);
    await expectCode(h.dbsAs("support").restoreDatabase({ id: database!.id }), Code.NotFound);
    await expectCode(h.dbsAs("support").restoreDatabase({ id: "db-nope" }), Code.NotFound);
  });
});

describe("retention", () => {
  it("marks only deletions past retention purged; a confirmed purge leaves the agent's snapshot", async () => {
    const expired = (await runningDb(h, ORG, AGENT)).database!;
    const kept = (await runningDb(h, ORG, AGENT)).database!;
    const live = (await runningDb(h, ORG, AGENT)).database!;
    await h.dbs.deleteDatabase({ organizationId: ORG, id: expired.id });
    await h.dbs.deleteDatabase({ organizationId: ORG, id: kept.id });
    await expireRetention(expired.id);
    const before = await specOf(h, AGENT, expired.id);

    expect(await sweepExpiredDeletions(h.ctx)).toBe(1);
    expect(await sweepExpiredDeletions(h.ctx)).toBe(0);

    const purging = await specOf(h, AGENT, expired.id);
    expect(purging).toMatchObject({ desiredState: DesiredState.PURGED });
    expect(purging!.generation).toBe(before!.generation + 1n);
    expect((await specOf(h, AGENT, kept.id))!.desiredState).toBe(DesiredState.DELETED);
    expect((await specOf(h, AGENT, live.id))!.desiredState).toBe(DesiredState.RUNNING);

    // Too late for support.
    await expectCode(h.dbsAs("support").restoreDatabase({ id: expired.id }), Code.NotFound);

    // A purge report for the spec before the purge changes nothing.
    await report(h, AGENT, expired.id, ObservedState.PURGED, { generation: before!.generation, credentials: 1n });
    expect(await specOf(h, AGENT, expired.id)).toBeDefined();

    await report(h, AGENT, expired.id, ObservedState.PURGED);
    const ids = (await snapshot(h, AGENT)).instances.map((i) => i.databaseId);
    expect(ids).not.toContain(expired.id);
    expect(ids).toEqual(expect.arrayContaining([kept.id, live.id]));
  });
});
