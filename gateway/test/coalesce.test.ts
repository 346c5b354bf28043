import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { startServer, type RunningServer } from "@dbaas/kit";
import { DatabasesService, type BatchGetDatabasesRequest } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../../services/databases/src/routes.ts";
import { createDb, createHarness, registerAgent, type Harness } from "../../services/databases/test/harness.ts";
import { api, startGateway, waitForRevocationFeed, type ApiResponse, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, SECRET, principal, startStubs, type Stubs } from "./support/stubs.ts";

/**
 * GET /v1/databases/{id} against the real databases service (its handlers,
 * read batcher and PostgreSQL behind a real HTTP/2 server), counting the RPCs
 * that server receives: the gateway must coalesce concurrent lookups into
 * BatchGetDatabases calls without changing any client's answer.
 */
let stubs: Stubs;
let h: Harness;
let server: RunningServer;
let gw: TestGateway;
const ORG_A = "org-coalesce-a";
const ORG_B = "org-coalesce-b";
const TOKEN_A = "tok-coalesce-a";
const TOKEN_B = "tok-coalesce-b";
const ids: Record<string, string[]> = { [ORG_A]: [], [ORG_B]: [] };

/** DatabasesService RPCs the server received, by method name, and the size of each batch. */
let rpcs: string[] = [];
let batchSizes: number[] = [];
/** While set, every DatabasesService RPC fails as a whole with this code, as an overloaded upstream would. */
let failWith: Code | undefined;
/** Milliseconds every DatabasesService RPC waits before it is handled. */
let delayMs = 0;

const counting: Interceptor = (next) => async (req) => {
  if (req.service.typeName === DatabasesService.typeName) {
    rpcs.push(req.method.name);
    if (req.method.name === "BatchGetDatabases") batchSizes.push((req.message as BatchGetDatabasesRequest).requests.length);
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    if (failWith !== undefined) throw new ConnectError("injected failure at 10.0.0.7:5432", failWith);
  }
  return await next(req);
};

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN_A, principal({ org: ORG_A, permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stubs.state.tokens.set(TOKEN_B, principal({ org: ORG_B, permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  h = await createHarness();
  await registerAgent(h, "coalesce-agent", { capacity: 20, ports: [57000, 57099] });
  for (const [org, n] of [
    [ORG_A, 4],
    [ORG_B, 2],
  ] as const) {
    for (let i = 0; i < n; i++) ids[org]!.push((await createDb(h, org)).database!.id);
  }
  server = await startServer({ port: 0, routes: routes(h.ctx), internalSecret: SECRET, log: h.ctx.log, interceptors: [counting] });
  gw = await startGateway({ identityUrl: stubs.identityUrl, databasesUrl: server.url, billingUrl: stubs.billingUrl });
  // Principals come from the gateway's cache, so requests reach the route without another upstream hop.
  await waitForRevocationFeed(gw);
});

afterAll(async () => {
  await gw?.close();
  await server?.close();
  await h?.close();
  await stubs?.close();
});

interface Get {
  token: string;
  id: string;
}

/** What a client can see of an answer, minus what differs on every request. */
function seen(res: ApiResponse) {
  const { request_id: requestId, ...meta } = res.body.meta;
  expect(requestId).toEqual(expect.any(String));
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: { ...res.body, meta } };
}

const getOne = (gateway: TestGateway, g: Get) => api(gateway.url, `/v1/databases/${g.id}`, { token: g.token }).then(seen);

/** The GETs one after another: each alone in its iteration, so each is a plain GetDatabase. */
async function oneByOne(gateway: TestGateway, gets: Get[]) {
  const answers = [];
  for (const g of gets) answers.push(await getOne(gateway, g));
  return answers;
}

const together = (gateway: TestGateway, gets: Get[]) => Promise.all(gets.map((g) => getOne(gateway, g)));

/** 40 GETs: the organization's own databases, another organization's, and ids that do not exist. */
function mixedGets(): Get[] {
  const [a0, a1, a2, a3] = ids[ORG_A]!;
  const [b0, b1] = ids[ORG_B]!;
  const round: Get[] = [
    { token: TOKEN_A, id: a0! },
    { token: TOKEN_A, id: b0! },
    { token: TOKEN_B, id: b1! },
    { token: TOKEN_A, id: "db-doesnotexist" },
    { token: TOKEN_A, id: a1! },
    { token: TOKEN_B, id: a2! },
    { token: TOKEN_B, id: b0! },
    { token: TOKEN_A, id: a2! },
    { token: TOKEN_A, id: a3! },
    { token: TOKEN_B, id: `db-missing${Math.random().toString(36).slice(2)}` },
  ];
  return Array.from({ length: 4 }, () => round).flat();
}

/** Runs `fn` and returns what it returned with the DatabasesService RPCs it caused. */
async function counted<T>(fn: () => Promise<T>): Promise<{ result: T; rpcs: string[]; batchSizes: number[] }> {
  rpcs = [];
  batchSizes = [];
  const result = await fn();
  return { result, rpcs, batchSizes };
}

describe("concurrent GET /v1/databases/{id}", () => {
  it("answer each client exactly as lone GETs do, in far fewer internal calls", async () => {
    const gets = mixedGets();
    const alone = await counted(() => oneByOne(gw, gets));
    expect(alone.rpcs).toEqual(gets.map(() => "GetDatabase"));
    expect(new Set(alone.result.map((a) => a.status))).toEqual(new Set([200, 404]));
    expect(alone.result.filter((a) => a.status === 404).every((a) => a.body.error.code === "resource_not_found")).toBe(true);

    // Once more, so that every HTTP connection the clients need is open: only the requests are measured.
    await together(gw, gets);
    const batched = await counted(() => together(gw, gets));
    expect(batched.result).toEqual(alone.result);
    expect(batched.rpcs).toContain("BatchGetDatabases");
    expect(batched.rpcs.length).toBeLessThanOrEqual(gets.length / 4);
    // Equal lookups of one iteration share an item: at most one per distinct (organization, id).
    expect(Math.max(...batched.batchSizes)).toBeLessThanOrEqual(10);
  });

  it("a lone GET is a plain GetDatabase", async () => {
    const { result, rpcs } = await counted(() => getOne(gw, { token: TOKEN_A, id: ids[ORG_A]![0]! }));
    expect(result.status).toBe(200);
    expect(rpcs).toEqual(["GetDatabase"]);
  });

  it("a batch refused as a whole gives every caller the 503 a lone GET gets", async () => {
    const gets = mixedGets();
    failWith = Code.Unavailable;
    try {
      const alone = await getOne(gw, gets[0]!);
      expect(alone).toMatchObject({ status: 503, retryAfter: "5", body: { error: { code: "service_unavailable" } } });
      const batched = await counted(() => together(gw, gets));
      expect(batched.rpcs).toContain("BatchGetDatabases");
      expect(batched.result).toEqual(gets.map(() => alone));
    } finally {
      failWith = undefined;
    }
  });

  it("a batch past its deadline gives every caller the 504 a lone GET gets", async () => {
    const hasty = await startGateway(
      { identityUrl: stubs.identityUrl, databasesUrl: server.url, billingUrl: stubs.billingUrl },
      { UPSTREAM_TIMEOUT_MS: "200" },
    );
    delayMs = 500;
    try {
      await waitForRevocationFeed(hasty);
      const gets = mixedGets();
      const alone = await getOne(hasty, gets[0]!);
      expect(alone).toMatchObject({ status: 504, body: { error: { code: "upstream_timeout" } } });
      const batched = await counted(() => together(hasty, gets));
      expect(batched.rpcs).toContain("BatchGetDatabases");
      expect(batched.result).toEqual(gets.map(() => alone));
    } finally {
      delayMs = 0;
      await hasty.close();
    }
  });

  it("an upstream refusing the gateway's credential is a 500 for every caller, as for a lone GET", async () => {
    const refusing = await startServer({ port: 0, routes: routes(h.ctx), internalSecret: "another-secret", log: h.ctx.log });
    const misconfigured = await startGateway({ identityUrl: stubs.identityUrl, databasesUrl: refusing.url, billingUrl: stubs.billingUrl });
    try {
      await waitForRevocationFeed(misconfigured);
      const gets = mixedGets();
      const alone = await getOne(misconfigured, gets[0]!);
      expect(alone).toMatchObject({ status: 500, body: { error: { code: "internal_error" } } });
      expect(await together(misconfigured, gets)).toEqual(gets.map(() => alone));
    } finally {
      await misconfigured.close();
      await refusing.close();
    }
  });

  it("with the upstream down, every caller gets the 503 a lone GET gets", async () => {
    await server.close();
    const gets = mixedGets();
    const alone = await getOne(gw, gets[0]!);
    expect(alone).toMatchObject({ status: 503, retryAfter: "5", body: { error: { code: "service_unavailable" } } });
    expect(await together(gw, gets)).toEqual(gets.map(() => alone));
  });
});
