import { createInternalClient, createLogger, migrate, startServer, type RunningServer } from "@dbaas/kit";
import { IdentityService, Role } from "@dbaas/proto/identity";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { readConfig } from "../../../services/identity/src/config.ts";
import { createContext, type AppContext } from "../../../services/identity/src/context.ts";
import { MIGRATIONS_DIR } from "../../../services/identity/src/db/schema.ts";
import type { MailSender, OutgoingMail } from "../../../services/identity/src/mail.ts";
import { routes } from "../../../services/identity/src/routes.ts";
import { SECRET, type Stubs } from "./stubs.ts";

/**
 * The real identity service (its own database, real HTTP/2 server, real
 * revocation feed) for gateway tests that must judge real principals; the
 * databases and billing services stay stubs. Mail is kept in memory.
 */
export interface RealIdentity {
  url: string;
  ctx: AppContext;
  client: ReturnType<typeof createInternalClient<typeof IdentityService>>;
  /** Calls as support does (the set-plan CLI): plans set by contract, no payment method asked for. */
  support: ReturnType<typeof createInternalClient<typeof IdentityService>>;
  /** Every mail identity sent, in order. */
  mails: OutgoingMail[];
  close(): Promise<void>;
}

export const PASSWORD = "correct horse battery";

export async function startRealIdentity(stubs: Pick<Stubs, "databasesUrl" | "billingUrl">): Promise<RealIdentity> {
  const db: TestDatabase = await createTestDatabase("identity");
  const config = readConfig({
    DATABASE_URL: db.url,
    INTERNAL_AUTH_SECRET: SECRET,
    PORT: "0",
    PASSWORD_SCRYPT_N: String(2 ** 14),
    DATABASES_URL: stubs.databasesUrl,
    BILLING_URL: stubs.billingUrl,
    MAIL_POLL_MS: "20",
  });
  const mails: OutgoingMail[] = [];
  const sender: MailSender = { send: async (mail) => void mails.push(mail), close() {} };
  const log = createLogger("identity-in-gateway-test");
  const ctx = createContext(config, { log, mailSender: sender });
  await migrate(ctx.pool, config.databaseSchema, MIGRATIONS_DIR);
  await ctx.revocations.start();
  ctx.mailRelay.start();
  const server: RunningServer = await startServer({ port: 0, routes: routes(ctx), internalSecret: SECRET, log });
  return {
    url: server.url,
    ctx,
    client: createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "test" }),
    support: createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "support" }),
    mails,
    async close() {
      await server.close();
      await ctx.mailRelay.close();
      await ctx.revocations.close();
      await ctx.pool.end();
      await db.drop();
    },
  };
}

/** The one-time token mailed to `email` (the relay runs every 20 ms). */
export async function mailedToken(identity: RealIdentity, email: string): Promise<string> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const mail = identity.mails.findLast((m) => m.to === email);
    const token = mail && /[?&]token=(dbi_[0-9A-Za-z]+)/.exec(mail.text)?.[1];
    if (token) return token;
    if (Date.now() > deadline) throw new Error(`no invitation mail to ${email}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

let counter = 0;
export const uniqueEmail = (label: string) => `${label.toLowerCase().replace(/[^a-z0-9]+/g, "-")}-${++counter}-${Date.now()}@example.com`;

export type RoleName = "owner" | "admin" | "developer" | "viewer";

/** An organization with one member of every role, each with a login token, set to the enterprise plan. */
export interface World {
  org: string;
  users: Record<RoleName, { id: string; email: string; memberId: string; token: string }>;
}

/** Invites `email` into the world's organization as `role` and accepts through the mailed link. */
export async function join(
  identity: RealIdentity,
  org: string,
  ownerId: string,
  role: "admin" | "developer" | "viewer",
  email = uniqueEmail(role),
) {
  await identity.client.createInvitation({ organizationId: org, actor: { userId: ownerId, role: Role.OWNER }, email, role });
  const accepted = await identity.client.acceptInvitation({ token: await mailedToken(identity, email), name: role, password: PASSWORD });
  return { id: accepted.member!.user!.id, email, memberId: accepted.member!.id, token: accepted.token!.accessToken };
}

export async function createWorld(identity: RealIdentity, label: string): Promise<World> {
  const email = uniqueEmail(`${label}-owner`);
  const signup = await identity.client.signup({ email, password: PASSWORD, name: "Owner", organizationName: label });
  const org = signup.organization!.id;
  // Far above the matrix's request count: rate limits are tested elsewhere. Set as support does, so the
  // organization has no payment method unless a test adds one.
  await identity.support.updateOrganization({ organizationId: org, plan: "enterprise" });
  const ownerMember = (await identity.client.listMembers({ organizationId: org })).members[0]!;
  const owner = { id: signup.user!.id, email, memberId: ownerMember.id, token: signup.token!.accessToken };
  const [admin, developer, viewer] = await Promise.all(
    (["admin", "developer", "viewer"] as const).map((role) => join(identity, org, owner.id, role)),
  );
  return { org, users: { owner, admin: admin!, developer: developer!, viewer: viewer! } };
}
