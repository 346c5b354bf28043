import { createClient, createRouterTransport, ConnectError, type Client, type Code } from "@connectrpc/connect";
import { createLogger, migrate, newId, type Clock } from "@dbaas/kit";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { IdentityService, type SignupResponse } from "@dbaas/proto/identity";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { expect } from "vitest";
import type { RoleName } from "../src/authz.ts";
import { readConfig } from "../src/config.ts";
import { createContext, MIGRATIONS_DIR, type AppContext } from "../src/context.ts";
import { routes } from "../src/routes.ts";

/** A clock a test can move. */
export class TestClock implements Clock {
  private ms = Date.parse("2030-01-01T00:00:00Z");
  now(): Date {
    return new Date(this.ms);
  }
  advance(seconds: number): void {
    this.ms += seconds * 1000;
  }
}

export interface Harness {
  ctx: AppContext;
  client: Client<typeof IdentityService>;
  clock: TestClock;
  db: TestDatabase;
  close(): Promise<void>;
}

export const TEST_SECRET = "identity-test-secret";

/** A migrated database of its own and a client calling the handlers in process. */
export async function createHarness(env: Record<string, string> = {}): Promise<Harness> {
  const db = await createTestDatabase("identity");
  const config = readConfig({
    DATABASE_URL: db.url,
    INTERNAL_AUTH_SECRET: TEST_SECRET,
    // Low scrypt cost for speed; passwords.test.ts covers the real default.
    PASSWORD_SCRYPT_N: String(2 ** 14),
    ...env,
  });
  const clock = new TestClock();
  const ctx = createContext(config, createLogger("identity-test"), { clock });
  await migrate(ctx.pool, config.databaseSchema, MIGRATIONS_DIR);
  const client = createClient(IdentityService, createRouterTransport(routes(ctx)));
  return {
    ctx,
    client,
    clock,
    db,
    async close() {
      await ctx.pool.end();
      await db.drop();
    },
  };
}

let counter = 0;
export const PASSWORD = "correct horse battery";

export function signupInput(overrides: Partial<{ email: string; password: string; name: string; organizationName: string }> = {}) {
  counter++;
  return {
    email: `user${counter}-${newId("x")}@example.com`,
    password: PASSWORD,
    name: `User ${counter}`,
    organizationName: `Org ${counter}`,
    ...overrides,
  };
}

export async function signupUser(h: Harness): Promise<SignupResponse> {
  return await h.client.signup(signupInput());
}

/**
 * A new user holding `role` in `organizationId`, and a login token acting there.
 * Memberships are written directly: inviting members is not this service's RPC yet.
 */
export async function addMember(h: Harness, organizationId: string, role: RoleName) {
  const own = await signupUser(h);
  await h.ctx.pool.query(
    "INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5)",
    [newId("member"), organizationId, own.user!.id, role, h.clock.now()],
  );
  const { token } = await h.client.createToken({ email: own.user!.email, password: PASSWORD, organizationId });
  return { user: own.user!, accessToken: token!.accessToken };
}

/** Awaits a call expected to fail with `code`, and returns the error. */
export async function expectError(call: Promise<unknown>, code: Code): Promise<ConnectError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "call should have failed").toBeInstanceOf(ConnectError);
  const ce = err as ConnectError;
  expect(ce.code, ce.message).toBe(code);
  return ce;
}

export function violations(err: ConnectError): Array<{ field: string; message: string }> {
  return err.findDetails(FieldViolationSchema).map((v) => ({ field: v.field, message: v.message }));
}
