import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";
import { purgeDeliveredOutbox, relayOutboxOnce } from "../src/outbox-relay.ts";
import { createDb, createHarness, registerAgent, report, runningDb, type Harness } from "./harness.ts";

let h: Harness;
const AGENT = "ob-agent";
const ORG = "org-outbox";

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, AGENT, { capacity: 100 });
});

afterAll(async () => {
  await h?.close();
});

beforeEach(async () => {
  // Each test relays only what it wrote.
  await h.ctx.pool.query("UPDATE outbox SET delivered_at = now() WHERE delivered_at IS NULL");
  h.billing.batches.length = 0;
  h.billing.failure = undefined;
  h.billing.gate = undefined;
});

interface OutboxRow {
  id: string;
  event_id: string;
  status: string;
  attempts: number;
  last_error: string;
  delivered: boolean;
}

async function outbox(databaseId?: string): Promise<OutboxRow[]> {
  const { rows } = await h.ctx.pool.query<OutboxRow>(
    `SELECT id, event_id, payload->>'status' AS status, attempts, last_error, delivered_at IS NOT NULL AS delivered
     FROM outbox WHERE $1::text IS NULL OR payload->>'database_id' = $1 ORDER BY id`,
    [databaseId ?? null],
  );
  return rows;
}

const pending = async () => (await outbox()).filter((r) => !r.delivered);

describe("status events", () => {
  it("are written once per status change, in the same order, with what billing needs", async () => {
    const { database } = await createDb(h, ORG, { tier: "small" });
    const id = database!.id;
    await report(h, AGENT, id, ObservedState.PROGRESSING);
    await report(h, AGENT, id, ObservedState.RUNNING);
    await report(h, AGENT, id, ObservedState.RUNNING);
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.STOPPED);
    await h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "medium" });
    await report(h, AGENT, id, ObservedState.STOPPED);
    await h.dbs.startDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.RUNNING);
    await h.dbs.updateDatabase({ organizationId: ORG, id, name: "renamed-outbox" });
    await h.dbs.deleteDatabase({ organizationId: ORG, id });

    const rows = await outbox(id);
    expect(rows.map((r) => r.status)).toEqual([
      "provisioning",
      "running",
      "stopping",
      "stopped",
      "resizing",
      "stopped",
      "starting",
      "running",
      "deleted",
    ]);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(rows.length);
    const { rows: payloads } = await h.ctx.pool.query("SELECT payload FROM outbox WHERE payload->>'database_id' = $1 ORDER BY id", [id]);
    expect(payloads[0].payload).toMatchObject({ organization_id: ORG, database_id: id, tier: "small", status: "provisioning" });
    // Events after the resize carry the new tier: billing prices running time by it.
    expect(payloads.at(-2).payload).toMatchObject({ tier: "medium", status: "running" });
    const times = payloads.map((p) => Date.parse(p.payload.occurred_at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it("are not written by a refused operation", async () => {
    const { database } = await createDb(h, ORG);
    const before = (await outbox(database!.id)).length;
    await h.dbs.startDatabase({ organizationId: ORG, id: database!.id }).catch(() => undefined);
    await h.dbs.resizeDatabase({ organizationId: ORG, id: database!.id, tier: "micro" }).catch(() => undefined);
    expect((await outbox(database!.id)).length).toBe(before);
  });
});

describe("relayOutboxOnce", () => {
  it("delivers pending events oldest first and marks them delivered", async () => {
    const a = (await runningDb(h, ORG, AGENT)).database!;
    const b = (await createDb(h, ORG)).database!;
    const expected = await pending();
    expect(expected.map((r) => r.status)).toEqual(["provisioning", "running", "provisioning"]);

    expect(await relayOutboxOnce(h.ctx)).toBe(3);
    const sent = h.billing.delivered();
    expect(sent.map((e) => e.eventId)).toEqual(expected.map((r) => r.event_id));
    expect(sent.map((e) => [e.databaseId, e.status])).toEqual([
      [a.id, "provisioning"],
      [a.id, "running"],
      [b.id, "provisioning"],
    ]);
    expect(sent[0]).toMatchObject({ organizationId: ORG, tier: "micro" });
    expect(timestampDate(sent[0]!.occurredAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await pending()).toEqual([]);

    // Nothing left: billing is not called again.
    expect(await relayOutboxOnce(h.ctx)).toBe(0);
    expect(h.billing.batches).toHaveLength(1);
  });

  it("sends at most a batch at a time, in order", async () => {
    for (let i = 0; i < 3; i++) await createDb(h, ORG);
    const expected = (await pending()).map((r) => r.event_id);
    expect(await relayOutboxOnce(h.ctx, 2)).toBe(2);
    expect(await relayOutboxOnce(h.ctx, 2)).toBe(1);
    expect(h.billing.batches.map((b) => b.length)).toEqual([2, 1]);
    expect(h.billing.delivered().map((e) => e.eventId)).toEqual(expected);
  });

  it("keeps events pending through a billing outage, recording why, and delivers them afterwards", async () => {
    await runningDb(h, ORG, AGENT);
    const expected = (await pending()).map((r) => r.event_id);
    h.billing.failure = new ConnectError("billing is down for maintenance", Code.Unavailable);

    await expect(relayOutboxOnce(h.ctx)).rejects.toThrow(/billing is down/);
    await expect(relayOutboxOnce(h.ctx)).rejects.toThrow(/billing is down/);
    const waiting = await pending();
    expect(waiting.map((r) => r.event_id)).toEqual(expected);
    for (const row of waiting) {
      expect(row.attempts).toBe(2);
      expect(row.last_error).toContain("billing is down for maintenance");
    }

    // Status changes keep being recorded meanwhile.
    const late = (await createDb(h, ORG)).database!;
    h.billing.failure = undefined;
    expect(await relayOutboxOnce(h.ctx)).toBe(expected.length + 1);
    const sent = h.billing.delivered();
    expect(sent.map((e) => e.eventId)).toEqual([...expected, (await outbox(late.id))[0]!.event_id]);
    expect(await pending()).toEqual([]);
  });

  it("never hands the same event to two relays running at once", async () => {
    for (let i = 0; i < 4; i++) await createDb(h, ORG);
    const expected = (await pending()).map((r) => r.event_id);
    let release!: () => void;
    h.billing.gate = new Promise((r) => (release = r));
    const first = relayOutboxOnce(h.ctx, 2);
    // The first relay's batch is locked while billing has it; the second takes the next batch.
    await new Promise((r) => setTimeout(r, 100));
    const second = relayOutboxOnce(h.ctx, 2);
    await new Promise((r) => setTimeout(r, 100));
    release();
    expect([await first, await second]).toEqual([2, 2]);
    const sent = h.billing.delivered().map((e) => e.eventId);
    expect([...sent].sort()).toEqual([...expected].sort());
    expect(new Set(sent).size).toBe(sent.length);
  });
});

describe("purgeDeliveredOutbox", () => {
  const HOUR = 3600_000;
  // Rows written here, apart from the other tests' (all delivered by beforeEach, just now).
  const row = async (eventId: string, deliveredHoursAgo: number | null, createdHoursAgo: number) => {
    await h.ctx.pool.query(
      `INSERT INTO outbox (event_id, topic, payload, created_at, delivered_at)
       VALUES ($1, 'purge.test', '{}', now() - make_interval(hours => $2), now() - make_interval(hours => $3::int))`,
      [eventId, createdHoursAgo, deliveredHoursAgo],
    );
  };
  const left = async () =>
    (await h.ctx.pool.query<{ event_id: string }>("SELECT event_id FROM outbox WHERE topic = 'purge.test' ORDER BY id")).rows.map(
      (r) => r.event_id,
    );

  it("deletes rows delivered before the retention, in batches, and keeps pending and recent ones", async () => {
    expect(h.ctx.cfg.outboxDeliveredRetentionHours).toBe(72);
    for (let i = 0; i < 5; i++) await row(`old-${i}`, 100 + i, 200);
    await row("pending-old", null, 500);
    await row("recent", 71, 200);
    await row("just-delivered", 0, 0);

    // Batches of 2: three statements for the five old rows.
    expect(await purgeDeliveredOutbox(h.ctx, 2)).toBe(5);
    expect(await left()).toEqual(["pending-old", "recent", "just-delivered"]);
    expect(await purgeDeliveredOutbox(h.ctx, 2)).toBe(0);

    // By the context's clock: two hours on, the row delivered 71 hours ago is past 72; pending stays.
    const later = { ...h.ctx, clock: { now: () => new Date(Date.now() + 2 * HOUR) } };
    expect(await purgeDeliveredOutbox(later)).toBe(1);
    expect(await left()).toEqual(["pending-old", "just-delivered"]);
  });

  it("takes OUTBOX_DELIVERED_RETENTION_HOURS from the environment", () => {
    expect(
      readConfig({
        DATABASE_URL: "postgres://x",
        INTERNAL_AUTH_SECRET: "s",
        BILLING_URL: "http://billing",
        IDENTITY_URL: "http://identity",
        OUTBOX_DELIVERED_RETENTION_HOURS: "24",
      }).outboxDeliveredRetentionHours,
    ).toBe(24);
  });
});
