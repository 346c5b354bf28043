import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { captureLog } from "@dbaas/test/support/log";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createRevocationHub, type RevocationHub } from "../src/revocations.ts";

/**
 * The hub on its own, against real LISTEN/NOTIFY: the order in which the
 * listener hears a revocation and the committing call asks after it must not
 * matter.
 */
let db: TestDatabase;
let hub: RevocationHub;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase("revocation_hub");
  pool = new pg.Pool({ connectionString: db.url });
  hub = createRevocationHub(db.url, "identity", captureLog());
  await hub.start();
  for (let i = 0; i < 50 && !hub.live; i++) await new Promise((r) => setTimeout(r, 20));
});

afterAll(async () => {
  await hub?.close();
  await pool?.end();
  await db?.drop();
});

it("waits for the acknowledgement even when the listener heard the revocation before the call asked", async () => {
  const sub = hub.subscribe()!;
  try {
    const client = await pool.connect();
    let id: string;
    try {
      await client.query("BEGIN");
      id = await hub.publish(client, { organizationId: "org-heard-first" });
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    // The listener hears it and hands it to the subscriber before `delivered` is called.
    const got = await sub.next(2_000, new AbortController().signal);
    if (typeof got === "string") throw new Error(`expected a revocation, got ${got}`);
    let done = false;
    const delivered = hub.delivered([id]).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(done).toBe(false);
    hub.ack(sub.id, got.seq);
    await delivered;
  } finally {
    sub.close();
  }
});
