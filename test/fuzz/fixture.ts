/**
 * The stack the fuzz runs against and what it needs to get past the front
 * door: an organization on the `internal` plan (so rate limits never refuse
 * it), a login token for each role (members invited through the API, the
 * invitation read from a real SMTP server), an API key, credentials that no
 * longer work, and ids of real resources that requests may name without
 * destroying what the rest of the run relies on.
 */
import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { invitationToken, startSmtpServer, type SmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";
import type { Json } from "./openapi.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const ROLES = ["owner", "admin", "developer", "viewer"] as const;
export type Role = (typeof ROLES)[number];

/** A credential the fuzz may send: `authorization` is the header's whole value (undefined: none). */
export interface Credential {
  name: string;
  authorization?: string;
  /** The role behind a working credential; undefined for one that must be refused. */
  role?: Role;
}

export interface Fixture {
  baseUrl: string;
  doc: Json;
  valid: Credential[];
  invalid: Credential[];
  /** Ids that exist, by what they are; requests name only ones whose use harms nothing (see generate.ts). */
  ids: Record<"database" | "ownerMember" | "ownerUser" | "spareKey" | "invitation" | "alert" | "organization", string | undefined>;
  databaseName: string;
  /** The owner's password: never sent by the fuzz (a transfer could then succeed). */
  password: string;
  /** What the fixture could not make (each with the answer it got): the run covers less without it. */
  missing: string[];
  /**
   * What the run broke of the fixture (it must not: generate.ts keeps requests harmless): each valid
   * credential still works in its role, the organization is still on the internal plan.
   */
  check(): Promise<string[]>;
  /** What the stack's processes printed (for looking up a failure's cause). */
  output(): string;
  close(): Promise<void>;
}

const PASSWORD = "fuzz correct horse battery staple";

async function call(baseUrl: string, method: string, path: string, body?: unknown, token?: string): Promise<any> {
  const res = await fetch(baseUrl + path, {
    method,
    headers: {
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`fuzz fixture: ${method} ${path} answered ${res.status}: ${text}`);
  return text === "" ? undefined : JSON.parse(text);
}

export interface FixtureOptions {
  /** Extra environment for the stack's processes. */
  env?: Record<string, string>;
}

export async function startFixture(opts: FixtureOptions = {}): Promise<Fixture> {
  const smtp: SmtpServer = await startSmtpServer();
  let metadata: TestDatabase | undefined;
  let stack: Stack | undefined;
  const close = async () => {
    await stack?.destroy();
    await metadata?.drop();
    await smtp.stop();
  };
  try {
    metadata = await createTestDatabase("fuzz");
    stack = await startStack({
      databaseUrl: metadata.url,
      env: {
        REDIS_URL: process.env.REDIS_URL || "redis://127.0.0.1:6379",
        SMTP_URL: smtp.url,
        // Requests without a credential are limited per client IP, and every request here comes from 127.0.0.1.
        IP_RATE_LIMIT_PER_MINUTE: "100000000",
        IP_RATE_LIMIT_PER_DAY: "1000000000",
        // Logins and sign-ups with plausible values hash passwords: the cheapest cost identity allows.
        PASSWORD_SCRYPT_N: String(2 ** 14),
        MAIL_POLL_MS: "50",
        ...opts.env,
      },
    });
    return await populate(stack, smtp, close);
  } catch (err) {
    await close();
    throw err;
  }
}

async function populate(stack: Stack, smtp: SmtpServer, close: () => Promise<void>): Promise<Fixture> {
  const base = stack.baseUrl;
  const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const signup = (
    await call(base, "POST", "/v1/auth/signup", {
      email: `fuzz-owner-${tag}@example.com`,
      password: PASSWORD,
      name: "Fuzz Owner",
      organization_name: "Fuzz Org",
    })
  ).data;
  const owner: string = signup.access_token;
  const organizationId: string = signup.organization.id;

  // The internal plan: limits no request reaches, so the run is never refused for its volume.
  await promisify(execFile)(process.execPath, ["--import", "tsx", "services/identity/src/cli/set-plan.ts", organizationId, "internal"], {
    cwd: root,
    env: { ...process.env, ...stack.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}` },
  });

  const plan = (await call(base, "GET", "/v1/organization", undefined, owner)).data.plan;
  if (plan !== "internal") throw new Error(`fuzz fixture: the organization is on plan ${plan} after set-plan, not internal`);

  const join = async (role: Exclude<Role, "owner">, label: string) => {
    const email = `fuzz-${label}-${tag}@example.com`;
    await call(base, "POST", "/v1/organization/members", { email, role }, owner);
    const mail = await smtp.waitForMail((m) => m.to.includes(email), 30_000);
    const accepted = (
      await call(base, "POST", "/v1/invitations/accept", { token: invitationToken(mail), name: `Fuzz ${label}`, password: PASSWORD })
    ).data;
    return { token: accepted.access_token as string, memberId: accepted.member.id as string };
  };
  const admin = await join("admin", "admin");
  const developer = await join("developer", "developer");
  const viewer = await join("viewer", "viewer");
  const leaver = await join("developer", "leaver");
  // Removing a member ends their sessions: a token that looks right and no longer works.
  await call(base, "DELETE", `/v1/organization/members/${leaver.memberId}`, undefined, owner);

  // Optional parts: the run goes on without them (and says so) when the stack cannot make them.
  const missing: string[] = [];
  const optional = async <T>(what: string, make: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await make();
    } catch (err) {
      missing.push(`${what}: ${(err as Error).message}`);
      return undefined;
    }
  };
  const newKey = (name: string) =>
    optional(`API key "${name}"`, async () => (await call(base, "POST", "/v1/organization/api-keys", { name }, owner)).data);
  const key = await newKey("fuzz key");
  const spare = await newKey("fuzz spare key");
  const revoked = await newKey("fuzz revoked key");
  if (revoked) await call(base, "DELETE", `/v1/organization/api-keys/${revoked.id}`, undefined, owner);
  // Login tokens live an hour; a key can be made to expire in seconds: an expired credential.
  const expiresAt = Date.now() + 2_000;
  const expiring = await optional(
    "expiring API key",
    async () =>
      (
        await call(
          base,
          "POST",
          "/v1/organization/api-keys",
          { name: "fuzz expiring key", expires_at: new Date(expiresAt).toISOString() },
          owner,
        )
      ).data,
  );

  const invitation = (
    await call(base, "POST", "/v1/organization/members", { email: `fuzz-pending-${tag}@example.com`, role: "viewer" }, owner)
  ).data;
  const databaseName = `fuzz-fixture-${tag}`;
  const database = (await call(base, "POST", "/v1/databases", { name: databaseName, region: "fsn1", tier: "micro" }, owner)).data;
  const alert = await optional("alert", () =>
    call(base, "POST", "/v1/billing/alerts", { threshold: 100, currency: "USD", channels: ["email"] }, owner),
  );
  const members = (await call(base, "GET", "/v1/organization/members?per_page=100", undefined, owner)).data.members as Json[];
  const ownerMember = members.find((m) => m.role === "owner");

  const doc = await call(base, "GET", "/v1/openapi.json");
  if (expiring) {
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now() + 1_000)));
    const res = await fetch(`${base}/v1/organization`, { headers: { authorization: `Bearer ${expiring.secret}` } });
    if (res.status !== 401) missing.push(`an expired API key: it still answers ${res.status} after its expires_at`);
  }
  const bearer = (t: string) => `Bearer ${t}`;
  const valid: Credential[] = [
    { name: "owner", authorization: bearer(owner), role: "owner" },
    { name: "admin", authorization: bearer(admin.token), role: "admin" },
    { name: "developer", authorization: bearer(developer.token), role: "developer" },
    { name: "viewer", authorization: bearer(viewer.token), role: "viewer" },
    ...(key ? [{ name: "owner-api-key", authorization: bearer(key.secret), role: "owner" as const }] : []),
  ];
  return {
    baseUrl: base,
    doc,
    valid,
    invalid: [
      { name: "none" },
      { name: "empty", authorization: "" },
      { name: "bearer-only", authorization: "Bearer" },
      { name: "bearer-space", authorization: "Bearer " },
      { name: "basic", authorization: "Basic dXNlcjpwYXNz" },
      { name: "lowercase-scheme", authorization: `bearer ${owner}x` },
      { name: "garbage", authorization: "Bearer !!!not-a-token!!!" },
      { name: "unknown-session", authorization: bearer(`dbs_${"A".repeat(43)}`) },
      { name: "unknown-key", authorization: bearer(`dbk_${"a".repeat(30)}000000`) },
      { name: "truncated-token", authorization: bearer(owner.slice(0, -3)) },
      { name: "token-with-suffix", authorization: bearer(`${owner}x`) },
      { name: "long-token", authorization: bearer("dbs_" + "x".repeat(8000)) },
      { name: "two-tokens", authorization: `Bearer ${owner}, Bearer ${viewer.token}` },
      { name: "removed-member-session", authorization: bearer(leaver.token) },
      ...(revoked ? [{ name: "revoked-api-key", authorization: bearer(revoked.secret) }] : []),
      ...(expiring ? [{ name: "expired-api-key", authorization: bearer(expiring.secret) }] : []),
      { name: "latin1-token", authorization: "Bearer \u00e9\u00ff\u00a0dbs_x" },
      { name: "tab-separated", authorization: `Bearer\t${owner}x` },
    ],
    ids: {
      database: database.id,
      ownerMember: ownerMember?.id,
      ownerUser: signup.user.id,
      spareKey: spare?.id,
      invitation: invitation.id,
      alert: alert?.data?.id,
      organization: organizationId,
    },
    databaseName,
    password: PASSWORD,
    missing,
    async check() {
      const broken: string[] = [];
      for (const c of valid) {
        const res = await fetch(`${base}/v1/organization`, { headers: { authorization: c.authorization! } });
        const body = (await res.json().catch(() => undefined)) as any;
        if (res.status !== 200) broken.push(`${c.name}: GET /v1/organization answered ${res.status}`);
        else if (body?.data?.plan !== "internal") broken.push(`the organization is on plan ${body?.data?.plan}, not internal`);
      }
      return [...new Set(broken)];
    },
    output: () => stack.output(),
    close,
  };
}
