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

/**
 * Two replicas of identity (LOCAL_REPLICAS=2): a gateway's stream may be held by
 * the replica that did not make the change. The revoking call must still wait
 * until that gateway applied the revocation — without the peers' confirmations
 * it answered at once, and a request racing it through that gateway was served
 * from a stale cache.
 */
it("waits for the gateways subscribed to another replica, which confirms once they acknowledged", async () => {
  const peer = createRevocationHub(db.url, "identity", captureLog());
  await peer.start();
  for (let i = 0; i < 50 && !peer.live; i++) await new Promise((r) => setTimeout(r, 20));
  const sub = peer.subscribe()!;
  try {
    const client = await pool.connect();
    let id: string;
    try {
      await client.query("BEGIN");
      id = await hub.publish(client, { organizationId: "org-on-the-other-replica" });
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    let done = false;
    const started = Date.now();
    const delivered = hub.delivered([id]).then(() => (done = true));
    const got = await sub.next(2_000, new AbortController().signal);
    if (typeof got === "string") throw new Error(`expected a revocation, got ${got}`);
    expect(got.revocation.organizationId).toBe("org-on-the-other-replica");
    await new Promise((r) => setTimeout(r, 300));
    expect(done).toBe(false);
    peer.ack(sub.id, got.seq);
    await delivered;
    // Well before the peer wait's bound: the confirmation, not the timeout, released it.
    expect(Date.now() - started).toBeLessThan(2_000);
  } finally {
    sub.close();
    await peer.close();
  }
});

it("stops waiting for a replica that went away, and a peer's gateway that does not acknowledge loses its stream", async () => {
  const peer = createRevocationHub(db.url, "identity", captureLog());
  await peer.start();
  for (let i = 0; i < 50 && !peer.live; i++) await new Promise((r) => setTimeout(r, 20));
  const silent = peer.subscribe()!;
  const client = await pool.connect();
  let id: string;
  try {
    await client.query("BEGIN");
    id = await hub.publish(client, { organizationId: "org-silent-gateway" });
    await client.query("COMMIT");
  } finally {
    client.release();
  }
  const started = Date.now();
  await hub.delivered([id]);
  // The peer cut its silent subscriber after ACK_WAIT_MS (1 s), then confirmed.
  expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  const events: string[] = [];
  for (;;) {
    const e = await silent.next(100, new AbortController().signal);
    if (e === "idle") break;
    events.push(typeof e === "string" ? e : "revocation");
    if (e === "closed") break;
  }
  expect(events).toEqual(["revocation", "closed"]);
  silent.close();

  // A replica that is gone: not waited for.
  const client2 = await pool.connect();
  try {
    await client2.query("BEGIN");
    id = await hub.publish(client2, { organizationId: "org-peer-gone" });
    await peer.close();
    await client2.query("COMMIT");
  } finally {
    client2.release();
  }
  const again = Date.now();
  await hub.delivered([id]);
  expect(Date.now() - again).toBeLessThan(1_500);
});
