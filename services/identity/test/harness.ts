import { createClient, createRouterTransport, ConnectError, type Client, type Code } from "@connectrpc/connect";
import { createLogger, migrate, newId, type Clock } from "@dbaas/kit";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { IdentityService, type SignupResponse } from "@dbaas/proto/identity";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { expect } from "vitest";
import { roleScopes, roleToProto, type RoleName } from "../src/authz.ts";
import { readConfig } from "../src/config.ts";
import type { Revocation } from "../src/revocations.ts";
import { createContext, type AppContext, type BillingClient, type DatabasesClient } from "../src/context.ts";
import { MIGRATIONS_DIR } from "../src/db/schema.ts";
import type { MailSender, OutgoingMail } from "../src/mail.ts";
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

/** Mail "sent" in process; `failing` makes every send fail as if the SMTP server were down. */
export class CapturingSender implements MailSender {
  sent: OutgoingMail[] = [];
  failing = false;
  async send(mail: OutgoingMail): Promise<void> {
    if (this.failing) throw new Error("connect ECONNREFUSED 127.0.0.1:25");
    this.sent.push(mail);
  }
  close(): void {}
}

/** The databases service as identity sees it: how many live databases an organization has. */
export class FakeDatabases implements DatabasesClient {
  totals = new Map<string, number>();
  failure: Error | undefined;
  async listDatabases(req: { organizationId?: string }) {
    if (this.failure) throw this.failure;
    return { total: this.totals.get(req.organizationId ?? "") ?? 0 } as Awaited<ReturnType<DatabasesClient["listDatabases"]>>;
  }
}

/** The billing service as identity sees it: whether an organization has a default payment method. */
export class FakeBilling implements BillingClient {
  /** Organizations without a default payment method (every other one has one). */
  withoutPaymentMethod = new Set<string>();
  /** Organizations with an unpaid past-due invoice. */
  withPastDueInvoice = new Set<string>();
  failure: Error | undefined;
  asked: string[] = [];
  async getStanding(req: { organizationId?: string }) {
    this.asked.push(req.organizationId ?? "");
    if (this.failure) throw this.failure;
    const org = req.organizationId ?? "";
    return { hasDefaultPaymentMethod: !this.withoutPaymentMethod.has(org), hasPastDueInvoice: this.withPastDueInvoice.has(org) } as Awaited<
      ReturnType<BillingClient["getStanding"]>
    >;
  }
}

export interface Harness {
  ctx: AppContext;
  client: Client<typeof IdentityService>;
  clock: TestClock;
  db: TestDatabase;
  mail: CapturingSender;
  databases: FakeDatabases;
  billing: FakeBilling;
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
  const mail = new CapturingSender();
  const databases = new FakeDatabases();
  const billing = new FakeBilling();
  const ctx = createContext(config, { log: createLogger("identity-test"), clock, mailSender: mail, databases, billing });
  await migrate(ctx.pool, config.databaseSchema, MIGRATIONS_DIR);
  await ctx.revocations.start();
  const client = createClient(IdentityService, createRouterTransport(routes(ctx)));
  return {
    ctx,
    client,
    clock,
    db,
    mail,
    databases,
    billing,
    async close() {
      await ctx.mailRelay.close();
      await ctx.revocations.close();
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
 * The membership is written directly, skipping the invitation round trip that
 * invitations.test.ts covers.
 */
export async function addMember(h: Harness, organizationId: string, role: RoleName) {
  const own = await signupUser(h);
  const memberId = newId("member");
  await h.ctx.pool.query("INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5)", [
    memberId,
    organizationId,
    own.user!.id,
    role,
    h.clock.now(),
  ]);
  const { token } = await h.client.createToken({ email: own.user!.email, password: PASSWORD, organizationId });
  return { user: own.user!, memberId, accessToken: token!.accessToken };
}

/**
 * The Actor of a request made by `userId` with a credential of `role`; its
 * permissions are the role's unless given (a login session has them all).
 */
export function actor(userId: string, role: RoleName, permissions: readonly string[] = roleScopes(role)) {
  return { userId, role: roleToProto(role), permissions: [...permissions] };
}

/** The membership id of `userId` in `organizationId`. */
export async function memberIdOf(h: Harness, organizationId: string, userId: string): Promise<string> {
  const found = await h.ctx.pool.query<{ id: string }>("SELECT id FROM memberships WHERE organization_id = $1 AND user_id = $2", [
    organizationId,
    userId,
  ]);
  return found.rows[0]!.id;
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

/**
 * A subscriber of the revocation feed that behaves as a gateway does: it
 * acknowledges every revocation as it reads it, so revoking calls are not
 * held up waiting for it.
 */
export function watchFeed(h: Pick<Harness, "ctx">) {
  const sub = h.ctx.revocations.subscribe();
  if (!sub) throw new Error("the revocation feed is not live");
  const abort = new AbortController();
  let seen: Revocation[] = [];
  let lastEvent = Date.now();
  let ended = false;
  void (async () => {
    for (;;) {
      const next = await sub.next(50, abort.signal);
      if (next === "aborted" || next === "closed") break;
      if (next === "idle") continue;
      lastEvent = Date.now();
      seen.push(next.revocation);
      h.ctx.revocations.ack(sub.id, next.seq);
    }
    ended = true;
  })();
  return {
    /** Everything received until the feed has been quiet for 200 ms; later calls return only what came since. */
    async drain(): Promise<Revocation[]> {
      while (!ended && Date.now() - lastEvent < 200) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      const out = seen;
      seen = [];
      return out;
    },
    close() {
      abort.abort();
      sub.close();
    },
  };
}
