import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createInternalClient, createLogger, migrate, startServer, type RunningServer } from "@dbaas/kit";
import { SCOPES } from "@dbaas/catalogue";
import { IdentityService, Role } from "@dbaas/proto/identity";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";
import { createContext, type AppContext } from "../src/context.ts";
import { MIGRATIONS_DIR } from "../src/db/schema.ts";
import { routes } from "../src/routes.ts";

const SECRET = "server-test-secret";
let db: TestDatabase;
let ctx: AppContext;
let server: RunningServer;

beforeAll(async () => {
  db = await createTestDatabase("identity");
  // No PASSWORD_SCRYPT_N: this file runs the real default cost end to end.
  const config = readConfig({ DATABASE_URL: db.url, INTERNAL_AUTH_SECRET: SECRET, PORT: "0" });
  const log = createLogger("identity-test");
  ctx = createContext(config, { log });
  await migrate(ctx.pool, config.databaseSchema, MIGRATIONS_DIR);
  server = await startServer({ port: config.port, routes: routes(ctx), internalSecret: SECRET, log });
});

afterAll(async () => {
  await server?.close();
  await ctx?.pool.end();
  await db?.drop();
});

describe("identity over HTTP/2", () => {
  it("signs up, logs in and authenticates through an internal client", async () => {
    const client = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "gateway" });
    const email = "wire@example.com";
    const signup = await client.signup({ email, password: "wire password", name: "Wire", organizationName: "Wire Org" });
    const stored = await ctx.pool.query("SELECT password_hash FROM users WHERE id = $1", [signup.user!.id]);
    expect(stored.rows[0].password_hash).toMatch(/^scrypt\$131072\$8\$1\$/);

    const { token } = await client.createToken({ email, password: "wire password" });
    const { principal } = await client.authenticate({ bearer: token!.accessToken });
    expect(principal!.userId).toBe(signup.user!.id);
    expect(principal!.role).toBe(Role.OWNER);
  });

  it("refuses a call without the internal credential", async () => {
    const bare = createClient(IdentityService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const err = await bare.getOrganization({ organizationId: "org-x" }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);

    const forged = createInternalClient(IdentityService, server.url, { secret: "not the secret", caller: "gateway" });
    const forgedErr = await forged.getOrganization({ organizationId: "org-x" }).catch((e: unknown) => ConnectError.from(e));
    expect((forgedErr as ConnectError).code).toBe(Code.Unauthenticated);
  });

  it("lets only support put an organization on the internal plan", async () => {
    const gateway = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "gateway" });
    const support = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "support" });
    const { organization, user } = await gateway.signup({
      email: "plan@example.com",
      password: "plan password",
      name: "P",
      organizationName: "Plan Org",
    });
    // The gateway passes who asks (the owner's login session); support acts on its own.
    const owner = { userId: user!.id, role: Role.OWNER, permissions: [...SCOPES] };
    const refused = await gateway
      .updateOrganization({ organizationId: organization!.id, actor: owner, plan: "internal" })
      .catch((e: unknown) => ConnectError.from(e));
    expect((refused as ConnectError).code).toBe(Code.InvalidArgument);
    const done = await support.updateOrganization({ organizationId: organization!.id, plan: "internal" });
    expect(done.organization!.plan).toBe("internal");
    // Support sets plans by contract, without asking billing (which this server has no address for)…
    expect((await support.updateOrganization({ organizationId: organization!.id, plan: "enterprise" })).organization!.plan).toBe(
      "enterprise",
    );
    // …a customer's move to a paid plan needs billing's answer: without BILLING_URL it cannot be made.
    await gateway.updateOrganization({ organizationId: organization!.id, actor: owner, plan: "free" });
    const unverifiable = await gateway
      .updateOrganization({ organizationId: organization!.id, actor: owner, plan: "pro" })
      .catch((e: unknown) => ConnectError.from(e));
    // Not enabled here (UNIMPLEMENTED with reason service_unavailable: the API's 503), never UNAVAILABLE.
    expect((unverifiable as ConnectError).code).toBe(Code.Unimplemented);
  });
});
