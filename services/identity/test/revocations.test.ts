import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createInternalClient, migrate, startServer, type RunningServer } from "@dbaas/kit";
import { IdentityService, type WatchRevocationsResponse } from "@dbaas/proto/identity";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";
import { createContext, type AppContext } from "../src/context.ts";
import { MIGRATIONS_DIR } from "../src/db/schema.ts";
import { routes } from "../src/routes.ts";
import { actor, CapturingSender, FakeDatabases, PASSWORD } from "./harness.ts";
import { captureLog } from "@dbaas/test/support/log";

/**
 * WatchRevocations over real HTTP/2, with two identity replicas on one
 * database: a change made through one is streamed by both.
 */
const SECRET = "revocations-test-secret";
let db: TestDatabase;
const replicas: Array<{ ctx: AppContext; server: RunningServer }> = [];

async function replica() {
  const config = readConfig({ DATABASE_URL: db.url, INTERNAL_AUTH_SECRET: SECRET, PORT: "0", PASSWORD_SCRYPT_N: String(2 ** 14) });
  const log = captureLog();
  const ctx = createContext(config, { log, mailSender: new CapturingSender(), databases: new FakeDatabases() });
  await migrate(ctx.pool, config.databaseSchema, MIGRATIONS_DIR);
  await ctx.revocations.start();
  const server = await startServer({ port: 0, routes: routes(ctx, { heartbeatMs: 200 }), internalSecret: SECRET, log });
  replicas.push({ ctx, server });
  return { ctx, server, client: createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "gateway" }) };
}

beforeAll(async () => {
  db = await createTestDatabase("identity");
});

afterAll(async () => {
  for (const r of replicas) {
    await r.server.close();
    await r.ctx.revocations.close();
    await r.ctx.mailRelay.close();
    await r.ctx.pool.end();
  }
  await db?.drop();
});

/**
 * Reads a stream in the background, acknowledging every revocation as a
 * gateway does (over AckRevocation); `next` waits for the next event of a kind.
 */
function watch(client: ReturnType<typeof createInternalClient<typeof IdentityService>>) {
  const abort = new AbortController();
  const events: WatchRevocationsResponse["event"][] = [];
  let ended: ConnectError | "ok" | undefined;
  let wake: (() => void) | undefined;
  void (async () => {
    try {
      let subscriptionId = "";
      for await (const res of client.watchRevocations({}, { signal: abort.signal })) {
        if (res.event.case === "subscribed") subscriptionId = res.event.value.subscriptionId;
        if (res.event.case === "revocation") await client.ackRevocation({ subscriptionId, seq: res.seq });
        events.push(res.event);
        wake?.();
      }
      ended = "ok";
    } catch (err) {
      ended = ConnectError.from(err);
    }
    wake?.();
  })();
  const waitUntil = async (done: () => boolean, what: string) => {
    const deadline = Date.now() + 5_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(events)}`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 50);
      });
    }
  };
  return {
    events,
    ended: () => ended,
    async next(kind: "subscribed" | "revocation" | "heartbeat") {
      await waitUntil(() => events.some((e) => e.case === kind), kind);
      const i = events.findIndex((e) => e.case === kind);
      return events.splice(i, 1)[0]!;
    },
    waitEnded: () => waitUntil(() => ended !== undefined, "end of stream").then(() => ended),
    close: () => abort.abort(),
  };
}

describe("WatchRevocations", () => {
  it("streams subscribed first, then every replica's revocations, with heartbeats while quiet", async () => {
    const a = await replica();
    const b = await replica();
    const onA = watch(a.client);
    const onB = watch(b.client);
    try {
      await onA.next("subscribed");
      await onB.next("subscribed");

      const owner = await a.client.signup({ email: "owner@example.com", password: PASSWORD, name: "O", organizationName: "Org" });
      const org = owner.organization!.id;
      const dev = await b.client.signup({ email: "dev@example.com", password: PASSWORD, name: "D", organizationName: "Own" });
      const devUser = dev.user!.id;
      await a.ctx.pool.query(
        "INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ('member-dev1', $1, $2, 'developer', now())",
        [org, devUser],
      );

      // Removed through replica B: both streams hear of it.
      await b.client.removeMember({ organizationId: org, actor: actor(owner.user!.id, "owner"), memberId: "member-dev1" });
      const expected = { case: "revocation", value: expect.objectContaining({ organizationId: org, userId: devUser, credentialId: "" }) };
      expect(await onA.next("revocation")).toEqual(expected);
      expect(await onB.next("revocation")).toEqual(expected);

      const key = await a.client.createApiKey({ organizationId: org, actor: actor(owner.user!.id, "owner"), name: "k" });
      await a.client.revokeApiKey({ organizationId: org, id: key.apiKey!.id, actor: actor(owner.user!.id, "owner") });
      expect((await onB.next("revocation")).value).toMatchObject({ credentialId: key.apiKey!.id, organizationId: "", userId: "" });

      await onA.next("heartbeat");
    } finally {
      onA.close();
      onB.close();
    }
  });

  it("ends every stream with UNAVAILABLE when the replica's listener connection is lost, and takes subscribers again once back", async () => {
    const a = await replica();
    const stream = watch(a.client);
    try {
      await stream.next("subscribed");
      const admin = new pg.Client({ connectionString: db.url });
      await admin.connect();
      try {
        await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid()
             AND (query LIKE 'LISTEN%' OR application_name LIKE '%:revocations:%')`,
        );
      } finally {
        await admin.end();
      }
      const ended = await stream.waitEnded();
      expect(ended).toBeInstanceOf(ConnectError);
      expect((ended as ConnectError).code).toBe(Code.Unavailable);

      // The listener reconnects on its own; a new subscription then works.
      const deadline = Date.now() + 10_000;
      while (!a.ctx.revocations.live && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const again = watch(a.client);
      try {
        await again.next("subscribed");
      } finally {
        again.close();
      }
    } finally {
      stream.close();
    }
  });

  it("refuses to subscribe without the internal credential", async () => {
    const a = await replica();
    const bare = createClient(IdentityService, createConnectTransport({ baseUrl: a.server.url, httpVersion: "2" }));
    const stream = watch(bare as never);
    const ended = await stream.waitEnded();
    expect((ended as ConnectError).code).toBe(Code.Unauthenticated);
    expect(stream.events).toEqual([]);
  });
});
