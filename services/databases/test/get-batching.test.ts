import { Code, ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { createInternalClient, createPool, startServer, type RunningServer } from "@dbaas/kit";
import { DatabasesService, type BatchGetDatabasesResponse } from "@dbaas/proto/databases";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../src/routes.ts";
import { SECRET, createDb, createHarness, eventually, expectCode, registerAgent, violationsOf, type Harness } from "./harness.ts";

let h: Harness;
let pool: pg.Pool;
let dbs: Client<typeof DatabasesService>;
let server: RunningServer;
const AGENT = "batch-agent";
const ORG_A = "org-batch-a";
const ORG_B = "org-batch-b";
const ids: Record<string, string[]> = { [ORG_A]: [], [ORG_B]: [] };
let deletedId: string;

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, AGENT, { capacity: 100, ports: [56000, 56099] });
  for (const org of [ORG_A, ORG_B]) {
    for (let i = 0; i < 5; i++) ids[org]!.push((await createDb(h, org)).database!.id);
  }
  deletedId = (await createDb(h, ORG_A)).database!.id;
  await h.dbs.deleteDatabase({ organizationId: ORG_A, id: deletedId });
  // Enough rows that the planner prices each key as an index probe, as in production: on a near-empty table all plans cost alike.
  await h.ctx.pool.query(
    `INSERT INTO databases (id, organization_id, name, region, tier, version, status, agent_id, port, desired_state, scram_verifier)
     SELECT 'db_filler_' || g, 'org-filler', 'filler-' || g, 'fsn1', 'micro', '17', 'running', $1, 30000 + g, 'running', 'x'
     FROM generate_series(1, 5000) g`,
    [AGENT],
  );
  await h.ctx.pool.query("ANALYZE databases");
  // One connection, so every statement of the handlers runs on one backend whose transactions can be counted.
  pool = createPool(h.pgdb.url, h.ctx.cfg.schema, 1);
  dbs = createClient(DatabasesService, createRouterTransport(routes({ ...h.ctx, pool })));
  server = await startServer({ port: 0, routes: routes({ ...h.ctx, pool }), internalSecret: SECRET, log: h.ctx.log });
});

afterAll(async () => {
  await server?.close();
  await pool?.end();
  await h?.close();
});

/**
 * PostgreSQL's number for the current transaction of `pool`'s only backend; it
 * counts up by one per transaction, and each statement outside BEGIN is one.
 */
async function localTransactionId(): Promise<number> {
  const { rows } = await pool.query<{ lxid: string }>(
    "SELECT split_part(virtualxid, '/', 2) AS lxid FROM pg_locks WHERE locktype = 'virtualxid' AND pid = pg_backend_pid()",
  );
  return Number(rows[0]!.lxid);
}

/** How many transactions (statements) PostgreSQL ran for the handlers while `fn` ran. */
async function transactionsDuring<T>(fn: () => Promise<T>): Promise<{ result: T; transactions: number }> {
  const before = await localTransactionId();
  const result = await fn();
  const after = await localTransactionId();
  return { result, transactions: after - before - 1 };
}

/**
 * Runs `calls` while their query fails: the handlers' backend is made to wait
 * on a table lock, then terminated. Resolves with what `calls` resolved with,
 * and the pid of the backend that was terminated.
 */
async function whileQueryFails<T>(calls: () => Promise<T>): Promise<{ result: T; backend: number }> {
  const { rows } = await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const backend = rows[0]!.pid;
  const locker = await h.ctx.pool.connect();
  try {
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE databases IN ACCESS EXCLUSIVE MODE");
    const pending = calls();
    await eventually(async () => {
      const waiting = await h.ctx.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [backend]);
      return waiting.rowCount === 1;
    });
    await h.ctx.pool.query("SELECT pg_terminate_backend($1)", [backend]);
    return { result: await pending, backend };
  } finally {
    await locker.query("ROLLBACK");
    locker.release();
  }
}

interface Lookup {
  organizationId: string;
  id: string;
}

/** Each lookup's outcome: the database id and organization answered, or the error code. */
function lookUpAll(lookups: Lookup[], client = dbs): Promise<string[]> {
  return Promise.all(
    lookups.map((l) =>
      client.getDatabase(l).then(
        (res) => `${res.database!.organizationId}/${res.database!.id}`,
        (err: unknown) => Code[ConnectError.from(err).code],
      ),
    ),
  );
}

describe("GetDatabase lookups made together", () => {
  it("are answered by one query, each caller with its own database", async () => {
    const lookups: Lookup[] = [];
    const expected: string[] = [];
    for (const org of [ORG_A, ORG_B]) {
      for (const id of ids[org]!) {
        lookups.push({ organizationId: org, id });
        expected.push(`${org}/${id}`);
      }
    }
    const { result, transactions } = await transactionsDuring(() => lookUpAll(lookups));
    expect(result).toEqual(expected);
    expect(transactions).toBe(1);
  });

  it("over one HTTP/2 session, as the gateway sends them, share queries", async () => {
    const gateway = createInternalClient(DatabasesService, server.url, { secret: SECRET, caller: "gateway" });
    const lookups = Array.from({ length: 50 }, (_, i) => ({ organizationId: ORG_A, id: ids[ORG_A]![i % 5]! }));
    await lookUpAll(lookups.slice(0, 1), gateway);
    const { result, transactions } = await transactionsDuring(() => lookUpAll(lookups, gateway));
    expect(result).toEqual(lookups.map((l) => `${ORG_A}/${l.id}`));
    // Calls made in one turn leave in one write and arrive in one or a few socket reads; one query each would be 50.
    expect(transactions).toBeLessThanOrEqual(5);
  });

  it("keep organizations apart, hide deleted databases and answer repeated keys each", async () => {
    const [a0, a1] = ids[ORG_A]!;
    const [b0] = ids[ORG_B]!;
    const lookups: Lookup[] = [
      { organizationId: ORG_A, id: a0! },
      { organizationId: ORG_B, id: a0! },
      { organizationId: ORG_A, id: a0! },
      { organizationId: ORG_A, id: b0! },
      { organizationId: ORG_B, id: b0! },
      { organizationId: ORG_A, id: deletedId },
      { organizationId: ORG_A, id: a1! },
      { organizationId: ORG_A, id: a0! },
      { organizationId: ORG_A, id: "db_does_not_exist" },
      { organizationId: "", id: a1! },
      { organizationId: ORG_A, id: `${a1!}\0` },
    ];
    const { result, transactions } = await transactionsDuring(() => lookUpAll(lookups));
    expect(result).toEqual([
      `${ORG_A}/${a0}`,
      "NotFound",
      `${ORG_A}/${a0}`,
      "NotFound",
      `${ORG_B}/${b0}`,
      "NotFound",
      `${ORG_A}/${a1}`,
      `${ORG_A}/${a0}`,
      "NotFound",
      "NotFound",
      "NotFound",
    ]);
    expect(transactions).toBe(1);
  });

  it("are split into queries of at most 100 keys", async () => {
    const lookups: Lookup[] = [];
    for (let i = 0; i < 230; i++) {
      const id = i % 10 === 0 ? ids[ORG_A]![(i / 10) % 5]! : `db_missing_${i}`;
      lookups.push({ organizationId: ORG_A, id });
    }
    const { result, transactions } = await transactionsDuring(() => lookUpAll(lookups));
    expect(result).toEqual(lookups.map((l) => (l.id.startsWith("db_missing_") ? "NotFound" : `${ORG_A}/${l.id}`)));
    expect(transactions).toBe(3);
  });

  it("are planned once per connection, not on every execution", async () => {
    // A connection of its own: which plan PostgreSQL keeps depends on the executions it has seen.
    const fresh = createPool(h.pgdb.url, h.ctx.cfg.schema, 1);
    try {
      const client = createClient(DatabasesService, createRouterTransport(routes({ ...h.ctx, pool: fresh })));
      for (let i = 0; i < 8; i++) await lookUpAll([{ organizationId: ORG_A, id: ids[ORG_A]![i % 5]! }], client);
      const { rows } = await fresh.query<{ generic: string; custom: string }>(
        "SELECT generic_plans AS generic, custom_plans AS custom FROM pg_prepared_statements WHERE name = 'get-databases'",
      );
      // PostgreSQL tries five custom plans, then keeps the generic one unless a custom plan looks cheaper.
      expect(Number(rows[0]!.custom)).toBeLessThanOrEqual(5);
      expect(Number(rows[0]!.generic)).toBeGreaterThanOrEqual(3);
    } finally {
      await fresh.end();
    }
  });

  it("all fail with the query's error when it fails, and the next lookups succeed", async () => {
    const [a0, a1] = ids[ORG_A]!;
    const { result: outcomes, backend } = await whileQueryFails(() =>
      Promise.all(
        [a0, a1, a0, "db_does_not_exist"].map((id) =>
          dbs.getDatabase({ organizationId: ORG_A, id: id! }).then(
            () => "answered",
            (err: unknown) => ConnectError.from(err),
          ),
        ),
      ),
    );
    expect(outcomes.map((o) => (o instanceof ConnectError ? Code[o.code] : o))).toEqual(Array(4).fill("Internal"));
    expect(
      await lookUpAll([
        { organizationId: ORG_A, id: a0! },
        { organizationId: ORG_A, id: a1! },
      ]),
    ).toEqual([`${ORG_A}/${a0}`, `${ORG_A}/${a1}`]);
    const replaced = await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    expect(replaced.rows[0]!.pid).not.toBe(backend);
  }, 15_000);
});

/** Each result of a BatchGetDatabases answer, written as lookUpAll writes a GetDatabase outcome. */
function outcomesOf(res: BatchGetDatabasesResponse): string[] {
  return res.results.map((r) => {
    if (r.result.case === "database") return `${r.result.value.organizationId}/${r.result.value.id}`;
    if (r.result.case === "error") return Code[r.result.value.code]!;
    return "empty";
  });
}

describe("BatchGetDatabases", () => {
  it("answers each request in order, as GetDatabase would, from one query", async () => {
    const [a0, a1] = ids[ORG_A]!;
    const [b0] = ids[ORG_B]!;
    const requests: Lookup[] = [
      { organizationId: ORG_A, id: a1! },
      { organizationId: ORG_A, id: b0! },
      { organizationId: ORG_A, id: "db_does_not_exist" },
      { organizationId: ORG_B, id: b0! },
      { organizationId: ORG_A, id: deletedId },
      { organizationId: ORG_A, id: a0! },
      { organizationId: ORG_A, id: a1! },
      { organizationId: ORG_A, id: `${a0!}\0` },
    ];
    const { result, transactions } = await transactionsDuring(() => dbs.batchGetDatabases({ requests }));
    expect(outcomesOf(result)).toEqual([
      `${ORG_A}/${a1}`,
      "NotFound",
      "NotFound",
      `${ORG_B}/${b0}`,
      "NotFound",
      `${ORG_A}/${a0}`,
      `${ORG_A}/${a1}`,
      "NotFound",
    ]);
    expect(transactions).toBe(1);
    // Item by item what the unary call answers: the same record, the same error code and message.
    for (const [i, request] of requests.entries()) {
      const unary = await dbs.getDatabase(request).then(
        (res) => ({ database: res.database }),
        (err: unknown) => ({ code: ConnectError.from(err).code, message: ConnectError.from(err).rawMessage }),
      );
      const item = result.results[i]!.result;
      expect(item.case === "database" ? { database: item.value } : { code: item.value?.code, message: item.value?.message }).toEqual(unary);
    }
  });

  it("never leaks another organization's database, however the batch mixes them", async () => {
    const requests = [...ids[ORG_A]!, ...ids[ORG_B]!].map((id) => ({ organizationId: ORG_B, id }));
    const res = await dbs.batchGetDatabases({ requests });
    expect(outcomesOf(res)).toEqual([...ids[ORG_A]!.map(() => "NotFound"), ...ids[ORG_B]!.map((id) => `${ORG_B}/${id}`)]);
    for (const r of res.results) if (r.result.case === "error") expect(r.result.value.message).toBe("database not found");
  });

  it("answers an empty batch with no results and no query", async () => {
    const { result, transactions } = await transactionsDuring(() => dbs.batchGetDatabases({ requests: [] }));
    expect(result.results).toEqual([]);
    expect(transactions).toBe(0);
  });

  it("answers 100 requests and refuses 101 with invalid_argument", async () => {
    const hundred = Array.from({ length: 100 }, (_, i) => ({ organizationId: ORG_A, id: ids[ORG_A]![i % 5]! }));
    expect(outcomesOf(await dbs.batchGetDatabases({ requests: hundred }))).toEqual(hundred.map((r) => `${ORG_A}/${r.id}`));
    const err = await expectCode(dbs.batchGetDatabases({ requests: [...hundred, hundred[0]!] }), Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([{ field: "requests", message: "must hold at most 100 requests" }]);
  });

  it("is served over HTTP/2 to the gateway's internal client", async () => {
    const gateway = createInternalClient(DatabasesService, server.url, { secret: SECRET, caller: "gateway" });
    const [a0] = ids[ORG_A]!;
    const res = await gateway.batchGetDatabases({
      requests: [
        { organizationId: ORG_A, id: a0! },
        { organizationId: ORG_B, id: a0! },
      ],
    });
    expect(outcomesOf(res)).toEqual([`${ORG_A}/${a0}`, "NotFound"]);
  });

  it("answers every item with an internal error when the query fails, without failing the call", async () => {
    const [a0, a1] = ids[ORG_A]!;
    const { result: res } = await whileQueryFails(() =>
      dbs.batchGetDatabases({
        requests: [
          { organizationId: ORG_A, id: a0! },
          { organizationId: ORG_A, id: "db_does_not_exist" },
        ],
      }),
    );
    expect(
      res.results.map((r) => r.result.case === "error" && { code: Code[r.result.value.code], message: r.result.value.message }),
    ).toEqual([
      { code: "Internal", message: "internal error" },
      { code: "Internal", message: "internal error" },
    ]);
    expect(outcomesOf(await dbs.batchGetDatabases({ requests: [{ organizationId: ORG_A, id: a1! }] }))).toEqual([`${ORG_A}/${a1}`]);
  }, 15_000);
});
