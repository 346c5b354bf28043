/**
 * Work one instance of the service does at a time, with two instances on one
 * metadata database (LOCAL_REPLICAS=2): the HA supervisor's and the DNS
 * reconcile's session advisory lock (src/singleton.ts).
 */
import pg from "pg";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { whileHolding } from "../src/singleton.ts";

let db: TestDatabase;
/** The two instances' pools. */
let one: pg.Pool;
let two: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase("singleton");
  one = new pg.Pool({ connectionString: db.url, max: 4 });
  two = new pg.Pool({ connectionString: db.url, max: 4 });
});

afterAll(async () => {
  await one?.end();
  await two?.end();
  await db?.drop();
});

it("runs the work in one instance at a time: the other's pass is skipped while it runs, and runs after", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const first = whileHolding(one, "singleton-test", async () => {
    await held;
    return "first";
  });
  await new Promise((r) => setTimeout(r, 200));
  expect(await whileHolding(two, "singleton-test", async () => "second")).toBeUndefined();
  release();
  expect(await first).toBe("first");
  expect(await whileHolding(two, "singleton-test", async () => "second")).toBe("second");
});

it("does not keep the lock on a pooled connection when the unlock failed: the other instance takes over at its next pass", async () => {
  // A connection of instance one whose unlock fails (a query timeout, a broken
  // statement under load): the session, alive, still holds the lock.
  const failingUnlock = {
    connect: async () => {
      const conn = await one.connect();
      const query = conn.query.bind(conn) as (...args: unknown[]) => Promise<unknown>;
      (conn as unknown as { query: unknown }).query = (text: unknown, ...rest: unknown[]) =>
        typeof text === "string" && text.includes("pg_advisory_unlock")
          ? Promise.reject(new Error("unlock timed out"))
          : query(text, ...rest);
      return conn;
    },
  } as unknown as pg.Pool;
  await expect(whileHolding(failingUnlock, "singleton-leak", async () => "pass")).rejects.toThrow("unlock timed out");
  // Instance one's pool keeps running (its connections busy with other work); instance two must not be locked out.
  // Its next passes: the destroyed connection's backend lets the lock go when it exits, a moment after the socket
  // closed (at once was too soon under the CI's load), so two passes a few times, 100 ms apart, within 15 s.
  let taken: string | undefined;
  for (const deadline = Date.now() + 15_000; taken === undefined && Date.now() < deadline; ) {
    taken = await whileHolding(two, "singleton-leak", async () => "taken over");
    if (taken === undefined) await new Promise((r) => setTimeout(r, 100));
  }
  expect(taken).toBe("taken over");
});
