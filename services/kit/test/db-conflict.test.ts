/**
 * Two requests whose transactions deadlock on a real PostgreSQL: the one PostgreSQL rolls back is answered as a
 * 503 "try again" (ABORTED with reason service_unavailable, what the gateway turns into 503), not INTERNAL (a 500
 * blaming the request), and the other one commits. The handler ran: never UNAVAILABLE, which a client may resend.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { IdentityService } from "@dbaas/proto/identity";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  createInternalClient,
  createLogger,
  createPool,
  databaseOutage,
  isTransactionConflict,
  type RunningServer,
  startServer,
  withTransaction,
  withTransactionRetried,
} from "../src/index.ts";

const SECRET = "conflict-test-secret";
let meta: TestDatabase;
let pool: pg.Pool;
let server: RunningServer;

/** Both transactions hold their first row before either asks for its second. */
let arrived = 0;
const bothHoldTheirFirstRow = async () => {
  arrived++;
  for (const deadline = Date.now() + 30_000; arrived < 2 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
};

beforeAll(async () => {
  meta = await createTestDatabase("kit_conflict");
  pool = createPool(meta.url, "public", 4);
  await pool.query("CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL); INSERT INTO accounts VALUES (1, 0), (2, 0)");
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("conflict-test"),
    interceptors: [databaseOutage("tests", createLogger("conflict-test"))],
    routes: (router) =>
      router.service(IdentityService, {
        // Locks row `first`, waits for the other request to lock its own, then asks for the other row.
        async getOrganization(req) {
          const first = req.organizationId === "a" ? 1 : 2;
          await withTransaction(pool, async (c) => {
            await c.query("SET LOCAL deadlock_timeout = '100ms'");
            await c.query("UPDATE accounts SET n = n + 1 WHERE id = $1", [first]);
            await bothHoldTheirFirstRow();
            await c.query("UPDATE accounts SET n = n + 1 WHERE id = $1", [3 - first]);
          });
          return {};
        },
      }),
  });
});

afterAll(async () => {
  await server?.close();
  await pool?.end();
  await meta?.drop();
});

it("answers the deadlock's loser with a 503 'try again' and lets the other commit", async () => {
  const client = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "tester" });
  const outcomes = await Promise.allSettled([
    client.getOrganization({ organizationId: "a" }),
    client.getOrganization({ organizationId: "b" }),
  ]);
  expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
  const err = ConnectError.from((outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult).reason);
  expect(Code[err.code]).toBe("Aborted");
  expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["service_unavailable"]);
  expect(err.rawMessage).toMatch(/try again$/);
  expect(err.rawMessage).not.toMatch(/deadlock|accounts/);
  // The winner's two updates, none of the loser's.
  const { rows } = await pool.query<{ n: number }>("SELECT sum(n)::int AS n FROM accounts");
  expect(rows[0]!.n).toBe(2);
});

it("knows a conflict by its SQLSTATE, also as a cause, and nothing else", () => {
  expect(isTransactionConflict(Object.assign(new Error("deadlock detected"), { code: "40P01" }))).toBe(true);
  expect(isTransactionConflict(new Error("wrapped", { cause: Object.assign(new Error("x"), { code: "40001" }) }))).toBe(true);
  expect(isTransactionConflict(Object.assign(new Error("unique"), { code: "23505" }))).toBe(false);
  expect(isTransactionConflict(new ConnectError("x", Code.Aborted))).toBe(false);
});

it("withTransactionRetried runs the deadlock's loser again: both commit", async () => {
  await pool.query("UPDATE accounts SET n = 0");
  let runs = 0;
  let holding = 0;
  const transfer = (first: number) =>
    withTransactionRetried(pool, async (c) => {
      runs++;
      await c.query("SET LOCAL deadlock_timeout = '100ms'");
      await c.query("UPDATE accounts SET n = n + 1 WHERE id = $1", [first]);
      // Both hold their first row before either asks for its second, on the first run only.
      holding++;
      for (const deadline = Date.now() + 30_000; holding < 2 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
      await c.query("UPDATE accounts SET n = n + 1 WHERE id = $1", [3 - first]);
    });
  await Promise.all([transfer(1), transfer(2)]);
  expect(runs).toBe(3);
  const { rows } = await pool.query<{ n: number }>("SELECT sum(n)::int AS n FROM accounts");
  expect(rows[0]!.n).toBe(4);
});
