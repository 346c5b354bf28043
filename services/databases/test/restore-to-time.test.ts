import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { ObservedState } from "@dbaas/proto/agent";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  completeBackup,
  createDb,
  createHarness,
  expectCode,
  registerAgent,
  report,
  runningDb,
  specOf,
  uniqueName,
  violationsOf,
  type Harness,
} from "./harness.ts";

// RestoreToTime: a new database from another's backups, made as CreateDatabase makes one.

let h: Harness;
const AGENT = "rst-a";
const HEL = "rst-hel";
const ORG = "org-rst";

beforeAll(async () => {
  // Manual backups only: the tests decide which backups exist.
  h = await createHarness({ BACKUP_MAX_RUNNING_PER_AGENT: "0" });
  await registerAgent(h, AGENT, { capacity: 1000, versions: ["17", "16"] });
  await registerAgent(h, HEL, { regions: ["hel1"], ports: [30000, 30999], versions: ["17", "16"] });
});

afterAll(async () => {
  await h?.close();
});

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

/** A running database of `org` with a completed backup and the restore window [earliest, latest]. */
async function backedUp(o: { org?: string; version?: string; tier?: string } = {}) {
  const org = o.org ?? ORG;
  const { database } = await runningDb(h, org, AGENT, { version: o.version, tier: o.tier });
  const { backup } = await h.dbs.createBackup({ organizationId: org, databaseId: database!.id });
  const window = { earliest: minutesAgo(30), latest: minutesAgo(1) };
  await completeBackup(h, AGENT, database!.id, backup!.id, [window.earliest, window.latest]);
  return { source: database!, ...window };
}

const restore = (req: { sourceDatabaseId: string; name?: string; restoreTime?: Timestamp; tier?: string; region?: string }) =>
  h.dbs.restoreToTime({ organizationId: ORG, name: uniqueName("restored"), ...req });

describe("RestoreToTime", () => {
  it("creates a new database like create does, from the source's latest instant, its version, tier and region", async () => {
    const { source, latest } = await backedUp({ version: "16", tier: "small" });
    const name = uniqueName("restored");
    const answer = await restore({ sourceDatabaseId: source.id, name });
    const db = answer.database!;
    expect(db).toMatchObject({ name, organizationId: ORG, version: "16", tier: "small", region: "fsn1", status: "provisioning" });
    expect(db.id).not.toBe(source.id);
    expect(db.host).toBe(`${db.id}.db.test`);
    expect(answer.password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(answer.connectionString).toContain(`:${answer.password}@${db.host}:`);
    expect(db.restoredFrom!.databaseId).toBe(source.id);
    expect(timestampDate(db.restoredFrom!.restoreTime!)).toEqual(latest);

    // Every read says where it came from; its agent is told to start from the source's backups.
    const got = (await h.dbs.getDatabase({ organizationId: ORG, id: db.id })).database!;
    expect(got.restoredFrom).toEqual(db.restoredFrom);
    const listed = (await h.dbs.listDatabases({ organizationId: ORG, perPage: 100 })).databases.find((d) => d.id === db.id);
    expect(listed!.restoredFrom).toEqual(db.restoredFrom);
    expect((await h.dbs.getDatabase({ organizationId: ORG, id: source.id })).database!.restoredFrom).toBeUndefined();
    const spec = (await specOf(h, AGENT, db.id))!;
    expect(spec.restoreSource!.databaseId).toBe(source.id);
    expect(timestampDate(spec.restoreSource!.restoreTime!)).toEqual(latest);
    expect(spec.version).toBe("16");
    expect((await specOf(h, AGENT, source.id))!.restoreSource).toBeUndefined();

    // Its operation is a restore, settled as a create is.
    const ops = async () =>
      (await h.dbs.listOperations({ organizationId: ORG, databaseId: db.id })).operations.map((o) => [o.type, o.status]);
    expect(await ops()).toEqual([["restore", "running"]]);
    await report(h, AGENT, db.id, ObservedState.RUNNING);
    expect(await ops()).toEqual([["restore", "succeeded"]]);
  });

  it("restores to a chosen instant within the window, both ends included, and to another tier and region", async () => {
    const { source, earliest, latest } = await backedUp();
    for (const at of [earliest, new Date((earliest.getTime() + latest.getTime()) / 2), latest]) {
      const { database } = await restore({ sourceDatabaseId: source.id, restoreTime: timestampFromDate(at) });
      expect(timestampDate(database!.restoredFrom!.restoreTime!)).toEqual(at);
    }
    const { database } = await restore({ sourceDatabaseId: source.id, tier: "medium", region: "hel1" });
    expect(database).toMatchObject({ tier: "medium", region: "hel1", version: source.version });
    expect((await specOf(h, HEL, database!.id))!.restoreSource!.databaseId).toBe(source.id);
  });

  it("refuses an instant outside the window: 422 naming restore_time and the window", async () => {
    const { source, earliest, latest } = await backedUp();
    const span = `${earliest.toISOString()} to ${latest.toISOString()}`;
    for (const at of [new Date(earliest.getTime() - 1), new Date(latest.getTime() + 1)]) {
      const err = await expectCode(restore({ sourceDatabaseId: source.id, restoreTime: timestampFromDate(at) }), Code.InvalidArgument);
      expect(err.rawMessage).toBe(`restore_time is outside the restore window, ${span}`);
      expect(violationsOf(err)).toEqual([{ field: "restore_time", message: `must be within the restore window, ${span}` }]);
    }
    const { rows } = await h.ctx.pool.query("SELECT count(*)::int AS n FROM databases WHERE restored_from_id = $1", [source.id]);
    expect(rows[0].n).toBe(0);
  });

  it("needs a completed backup: 409 before the first one", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const err = await expectCode(restore({ sourceDatabaseId: database!.id }), Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/no completed backup yet/);
    await h.dbs.createBackup({ organizationId: ORG, databaseId: database!.id });
    await expectCode(restore({ sourceDatabaseId: database!.id }), Code.FailedPrecondition);
  });

  it("is NOT_FOUND for another organization's database and a deleted one", async () => {
    const { source } = await backedUp();
    await expectCode(h.dbs.restoreToTime({ organizationId: "org-else", sourceDatabaseId: source.id, name: "stolen" }), Code.NotFound);
    await h.dbs.deleteDatabase({ organizationId: ORG, id: source.id });
    await expectCode(restore({ sourceDatabaseId: source.id }), Code.NotFound);
  });

  it("applies create's rules: the name (422, and 409 when taken), the tier and region, the free allowance (402)", async () => {
    const { source } = await backedUp();
    const bad = await expectCode(restore({ sourceDatabaseId: source.id, name: "ab", tier: "huge", region: "mars" }), Code.InvalidArgument);
    expect(violationsOf(bad).map((v) => v.field)).toEqual(["name", "region", "tier"]);
    const taken = await expectCode(restore({ sourceDatabaseId: source.id, name: source.name.toUpperCase() }), Code.AlreadyExists);
    expect(taken.rawMessage).toMatch(/already exists/);

    // Without a payment method, two micro databases run free; a restore is a third.
    const org = "org-rst-free";
    h.billing.withoutPaymentMethod.add(org);
    const { source: free } = await backedUp({ org });
    await createDb(h, org);
    const err = await expectCode(
      h.dbs.restoreToTime({ organizationId: org, sourceDatabaseId: free.id, name: uniqueName("over") }),
      Code.FailedPrecondition,
    );
    expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
  });
});
