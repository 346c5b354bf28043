import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { InstanceSampleSchema } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { relayStorageNoticesOnce } from "../src/storage.ts";
import { createHarness, type Harness, registerAgent, runningDb, specOf } from "./harness.ts";

// Storage per tier (storage.ts): the samples decide. A micro tier's 10 GB stand for 10 MB here
// (TEST_STORAGE_BYTES_PER_GB); identity is a recording stand-in for NotifyOrganization's caller side
// (the real mail path is test/e2e/storage-full.test.ts).

let h: Harness;
const AGENT = "storage-agent";
const ORG = "org-storage";
const MB = 1_000_000;

beforeAll(async () => {
  h = await createHarness({ TEST_STORAGE_BYTES_PER_GB: String(MB) });
  await registerAgent(h, AGENT, { capacity: 10 });
});

afterAll(async () => {
  await h?.close();
});

let seq = 0;
const sample = (databaseId: string, storageBytes: number) =>
  h.agents.reportSamples({
    agentId: AGENT,
    samples: [
      create(InstanceSampleSchema, {
        databaseId,
        sampleId: `s-${++seq}`,
        sampledAt: timestampFromDate(new Date(Date.now() + seq * 1000)),
        countersEpoch: "e",
        storageBytes: BigInt(storageBytes),
      }),
    ],
  });

const storageOps = async (id: string) =>
  (
    await h.ctx.pool.query<{ type: string; status: string; notify_pending: boolean }>(
      "SELECT type, status, notify_pending FROM operations WHERE database_id = $1 AND type LIKE 'storage_%' ORDER BY started_at, id",
      [id],
    )
  ).rows;

describe("storage per tier", () => {
  it("full at 100 %: storage_full, read_only in the spec, a mail pending; writable again below 95 % only", async () => {
    const id = (await runningDb(h, ORG, AGENT)).database!.id;
    await sample(id, 9.9 * MB);
    expect(await storageOps(id)).toEqual([]);
    expect((await specOf(h, AGENT, id))!.readOnly).toBe(false);
    await sample(id, 10 * MB);
    expect(await storageOps(id)).toEqual([{ type: "storage_full", status: "succeeded", notify_pending: true }]);
    expect((await specOf(h, AGENT, id))!.readOnly).toBe(true);
    // Between 95 % and 100 %: still full, nothing new.
    await sample(id, 9.6 * MB);
    expect((await storageOps(id)).length).toBe(1);
    await sample(id, 9.4 * MB);
    expect((await storageOps(id)).map((o) => o.type)).toEqual(["storage_full", "storage_ok"]);
    expect((await specOf(h, AGENT, id))!.readOnly).toBe(false);
  });

  it("mails each storage operation once through identity, under its operation id", async () => {
    const calls: { notificationId: string; permission: string; subject: string }[] = [];
    const identity = {
      notifyOrganization: async (req: { notificationId: string; permission: string; subject: string }) => {
        calls.push(req);
        return { recipients: 1 };
      },
    } as unknown as Harness["ctx"]["identity"];
    const ctx = { ...h.ctx, identity };
    const sent = await relayStorageNoticesOnce(ctx);
    expect(sent).toBe(2);
    expect(calls.map((c) => c.subject)).toEqual([expect.stringMatching(/is full and read-only/), expect.stringMatching(/writable again/)]);
    expect(new Set(calls.map((c) => c.permission))).toEqual(new Set(["members:write"]));
    expect(await relayStorageNoticesOnce(ctx)).toBe(0);
  });
});
