/**
 * Organization and team management end to end, against the real stack: a
 * real SMTP server process receives the invitation mail, the link's token is
 * accepted, and a removal is felt at once by two gateway processes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { invitationToken, startSmtpServer, type ReceivedMail, type SmtpServer } from "../support/smtp.ts";
import { freePortBlock, startStack, type Stack } from "../support/stack.ts";

let metadata: TestDatabase;
let sql: pg.Client;
let smtp: SmtpServer;
let stack: Stack;
let gateway2: { url: string; process: ChildProcess; output: () => string };
const PASSWORD = "correct horse battery staple";

/** A second gateway process in front of the same services, as a second replica would be. */
async function startSecondGateway(port: number): Promise<typeof gateway2> {
  const secret = (await readFile(join(stack.dataDir, "internal-auth-secret"), "utf8")).trim();
  const base = Number(stack.env.PORT);
  const child = spawn(process.execPath, ["--import", "tsx", "gateway/src/main.ts"], {
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    env: {
      ...process.env,
      PORT: String(port),
      IDENTITY_URL: `http://127.0.0.1:${base + 1}`,
      DATABASES_URL: `http://127.0.0.1:${base + 2}`,
      BILLING_URL: `http://127.0.0.1:${base + 3}`,
      INTERNAL_AUTH_SECRET: secret,
      LOG_LEVEL: "info",
      REDIS_URL: "",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  for (const stream of [child.stdout!, child.stderr!]) createInterface({ input: stream }).on("line", (l) => (output += l + "\n"));
  // Listening is not enough: its principal cache is trusted only once identity's revocation feed is subscribed.
  await waitFor(async () => output.includes("revocation feed subscribed"), 30_000, `second gateway ready:\n${output}`, { everyMs: 100 });
  return { url: `http://127.0.0.1:${port}`, process: child, output: () => output };
}

const sha256 = (s: string) => createHash("sha256").update(s).digest();

async function mailTo(email: string): Promise<ReceivedMail> {
  return await smtp.waitForMail((m) => m.to.includes(email), 30_000);
}

let n = 0;
const email = (label: string) => `${label}-${++n}-${Date.now()}@example.com`;

beforeAll(async () => {
  smtp = await startSmtpServer();
  metadata = await createTestDatabase("e2e_org");
  sql = new pg.Client({ connectionString: metadata.url });
  await sql.connect();
  // Ports chosen here so identity can be told where the databases service listens (gateway port + 2).
  const base = await freePortBlock(16);
  stack = await startStack({
    databaseUrl: metadata.url,
    agents: "fsn1",
    env: {
      PORT: String(base),
      METADATA_PG_PORT: String(base + 15),
      SMTP_URL: smtp.url,
      PUBLIC_BASE_URL: `http://127.0.0.1:${base}`,
      DATABASES_URL: `http://127.0.0.1:${base + 2}`,
    },
  });
  await waitFor(async () => /gateway\s+\| revocation feed subscribed/.test(stack.output()), 30_000, "stack gateway feed", { everyMs: 100 });
  gateway2 = await startSecondGateway(base + 5);
}, 240_000);

afterAll(async () => {
  if (gateway2 && gateway2.process.exitCode === null) {
    const exited = new Promise((r) => gateway2.process.once("exit", r));
    gateway2.process.kill("SIGTERM");
    await exited;
  }
  await stack?.destroy();
  await smtp?.stop();
  await sql?.end();
  await metadata?.drop();
});

describe("organization and team, end to end", () => {
  let ownerAccount: Awaited<ReturnType<ReturnType<typeof createApi>["signup"]>>;
  let api: ReturnType<typeof createApi>;
  let api2: ReturnType<typeof createApi>;
  let newOwner: ReturnType<typeof createApi>;
  const admin = { email: "", password: "a brand new password", token: "", userId: "", memberId: "" };
  let veteran: { email: string; userId: string; memberId: string };

  it("signs up an owner and moves the organization to enterprise (rate limits out of the way)", async () => {
    api = createApi(stack.baseUrl);
    api2 = createApi(gateway2.url);
    ownerAccount = await api.signup("org-owner");
    api2.setToken(ownerAccount.access_token);
    // A paid plan needs a payment method first.
    const refused = await api.patch("/v1/organization", { plan: "enterprise" });
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe("payment_required");
    await api.addPaymentMethod();
    const plan = await api.patch("/v1/organization", { plan: "enterprise" });
    expect(plan.status).toBe(200);
    expect(plan.body.data).toMatchObject({ id: ownerAccount.organization.id, plan: "enterprise" });
    expect((await api.get("/v1/organization")).headers.get("x-ratelimit-limit")).toBe("10000");
  });

  it("invites by e-mail: 201 pending invitation, and a real mail with a one-time link arrives over SMTP", async () => {
    admin.email = email("new-admin");
    const foreign = await api.post("/v1/organization/members", {
      email: admin.email,
      role: "admin",
      organization_id: "org-elsewhere",
      status: "accepted",
    });
    expect(foreign.status).toBe(422);
    const res = await api.post("/v1/organization/members", { email: admin.email, role: "admin" });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ email: admin.email, role: "admin", status: "pending" });
    expect(res.body.data.id).toMatch(/^invite-/);
    expect(Date.parse(res.body.data.expires_at) - Date.parse(res.body.data.created_at)).toBe(7 * 24 * 3600 * 1000);

    const mail = await mailTo(admin.email);
    expect(mail.subject).toBe(`Test User invited you to Test Org`);
    expect(mail.text).toContain(`${stack.baseUrl}/join?token=`);
    // Only a hash of the token is stored.
    const token = invitationToken(mail);
    const row = await sql.query("SELECT token_hash FROM identity.invitations WHERE id = $1", [res.body.data.id]);
    expect(row.rows[0].token_hash).toEqual(sha256(token));
    expect(JSON.stringify(row.rows)).not.toContain(token);

    const accepted = await createApi(stack.baseUrl).post("/v1/invitations/accept", { token, name: "New Admin", password: admin.password });
    expect(accepted.status).toBe(201);
    expect(accepted.body.data.organization.id).toBe(ownerAccount.organization.id);
    expect(accepted.body.data.member).toMatchObject({ role: "admin", user: { email: admin.email, name: "New Admin" } });
    admin.userId = accepted.body.data.member.user.id;
    admin.memberId = accepted.body.data.member.id;

    // The new member logs in with the password they chose.
    const login = await createApi(stack.baseUrl).post("/v1/auth/token", { email: admin.email, password: admin.password });
    expect(login.status).toBe(200);
    admin.token = login.body.data.access_token;

    const reused = await createApi(stack.baseUrl).post("/v1/invitations/accept", { token, name: "Again", password: admin.password });
    expect(reused.status).toBe(409);
    expect(reused.body.error.message).toBe("invitation was already accepted");
  });

  it("lets an existing account join with its own password", async () => {
    const other = createApi(stack.baseUrl);
    const account = await other.signup("veteran");
    const inv = await api.post("/v1/organization/members", { email: account.email, role: "developer" });
    expect(inv.status).toBe(201);
    const token = invitationToken(await mailTo(account.email));
    const wrong = await createApi(stack.baseUrl).post("/v1/invitations/accept", { token, password: "not the password" });
    expect(wrong.status).toBe(401);
    const joined = await createApi(stack.baseUrl).post("/v1/invitations/accept", { token, name: "ignored", password: account.password });
    expect(joined.status).toBe(201);
    expect(joined.body.data.member).toMatchObject({ role: "developer", user: { email: account.email, name: "Test User" } });
    veteran = { email: account.email, userId: joined.body.data.member.user.id, memberId: joined.body.data.member.id };

    const members = await api2.get("/v1/organization/members");
    expect(members.status).toBe(200);
    expect(members.body.data.members.map((m: { role: string }) => m.role).sort()).toEqual(["admin", "developer", "owner"]);
  });

  it("refuses a cancelled and an expired invitation token", async () => {
    const cancelledEmail = email("cancelled");
    const cancelled = await api.post("/v1/organization/members", { email: cancelledEmail, role: "viewer" });
    const cancelledToken = invitationToken(await mailTo(cancelledEmail));
    expect((await api.delete(`/v1/organization/invitations/${cancelled.body.data.id}`)).status).toBe(204);
    const afterCancel = await createApi(stack.baseUrl).post("/v1/invitations/accept", {
      token: cancelledToken,
      name: "C",
      password: PASSWORD,
    });
    expect(afterCancel.status).toBe(404);
    expect(afterCancel.body.error).toMatchObject({ code: "resource_not_found", message: "invitation was cancelled" });

    const expiredEmail = email("expired");
    const expired = await api.post("/v1/organization/members", { email: expiredEmail, role: "viewer" });
    const expiredToken = invitationToken(await mailTo(expiredEmail));
    // Seven days cannot pass in a test: the invitation is made older instead.
    await sql.query("UPDATE identity.invitations SET expires_at = now() - interval '1 second' WHERE id = $1", [expired.body.data.id]);
    const late = await createApi(stack.baseUrl).post("/v1/invitations/accept", { token: expiredToken, name: "E", password: PASSWORD });
    expect(late.status).toBe(409);
    expect(late.body.error.message).toMatch(/^invitation expired at .*; ask for a new one$/);
    const listed = await api.get("/v1/organization/invitations");
    expect(listed.body.data.invitations).toEqual([expect.objectContaining({ id: expired.body.data.id, status: "expired" })]);

    const unknown = await createApi(stack.baseUrl).post("/v1/invitations/accept", {
      token: "dbi_" + "x".repeat(43),
      name: "U",
      password: PASSWORD,
    });
    expect(unknown.status).toBe(404);
  });

  // Its own timeout covers its waits (the failed attempt, the SMTP server's start, the mail, the 2 s after).
  it("keeps an invitation mail while the SMTP server is down and delivers it once it is back", {
    timeout: 20_000 + 20_000 + 30_000 + 2_000 + 15_000,
  }, async () => {
    const port = smtp.port;
    await smtp.stop();
    const lateEmail = email("smtp-outage");
    const res = await api.post("/v1/organization/members", { email: lateEmail, role: "viewer" });
    expect(res.status).toBe(201);
    await waitFor(async () => stack.output().includes("mail not sent; will retry"), 20_000, "a failed delivery attempt", { everyMs: 100 });
    smtp = await startSmtpServer(port);
    const mail = await mailTo(lateEmail);
    expect(invitationToken(mail)).toMatch(/^dbi_/);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(smtp.mails.filter((m) => m.to.includes(lateEmail))).toHaveLength(1);
  });

  it("protects the owner: not removable, not demotable, owner only by transfer", async () => {
    const asAdmin = createApi(stack.baseUrl);
    asAdmin.setToken(admin.token);
    const members = (await asAdmin.get("/v1/organization/members")).body.data.members;
    const ownerMember = members.find((m: { role: string }) => m.role === "owner");
    const remove = await asAdmin.delete(`/v1/organization/members/${ownerMember.id}`);
    expect(remove.status).toBe(409);
    const demote = await asAdmin.patch(`/v1/organization/members/${ownerMember.id}`, { role: "viewer" });
    expect(demote.status).toBe(409);
    const promote = await asAdmin.patch(`/v1/organization/members/${veteran.memberId}`, { role: "owner" });
    expect(promote.status).toBe(422);
    const inviteOwner = await asAdmin.post("/v1/organization/members", { email: email("o"), role: "owner" });
    expect(inviteOwner.status).toBe(422);
    const plan = await asAdmin.patch("/v1/organization", { plan: "free" });
    expect(plan.status).toBe(403);
    const del = await asAdmin.delete("/v1/organization");
    expect(del.status).toBe(403);
  });

  it("removing a member ends their sessions at once on both gateways; their API key lives until revoked", async () => {
    const onGw1 = createApi(stack.baseUrl);
    const onGw2 = createApi(gateway2.url);
    onGw1.setToken(admin.token);
    onGw2.setToken(admin.token);
    const key = await onGw1.post("/v1/organization/api-keys", { name: "admin's deploy key" });
    expect(key.status).toBe(201);
    const keyOn1 = createApi(stack.baseUrl);
    const keyOn2 = createApi(gateway2.url);
    keyOn1.setToken(key.body.data.secret);
    keyOn2.setToken(key.body.data.secret);
    // Warm both gateways' principal caches.
    for (const c of [onGw1, onGw2, keyOn1, keyOn2]) expect((await c.get("/v1/organization/members")).status).toBe(200);

    expect((await api2.delete(`/v1/organization/members/${admin.memberId}`)).status).toBe(204);
    for (const c of [onGw1, onGw2]) {
      const res = await c.get("/v1/organization/members");
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("invalid_token");
    }
    for (const c of [keyOn1, keyOn2]) expect((await c.get("/v1/organization/members")).status).toBe(200);

    expect((await api.delete(`/v1/organization/api-keys/${key.body.data.id}`)).status).toBe(204);
    for (const c of [keyOn1, keyOn2]) expect((await c.get("/v1/organization/members")).status).toBe(401);
  });

  it("an expired login token is refused with a message saying so", async () => {
    const login = await createApi(stack.baseUrl).post("/v1/auth/token", { email: veteran.email, password: ownerAccount.password });
    const token: string = login.body.data.access_token;
    await sql.query("UPDATE identity.sessions SET expires_at = now() - interval '1 second' WHERE token_hash = $1", [sha256(token)]);
    const c = createApi(stack.baseUrl);
    c.setToken(token);
    const res = await c.get("/v1/organization");
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ code: "invalid_token", message: "token expired" });
  });

  it("transfers ownership with the owner's password; the former owner is admin from the next request on", async () => {
    const wrong = await api.post("/v1/organization/transfer", { new_owner_id: veteran.userId, password: "wrong password" });
    expect(wrong.status).toBe(422);
    const res = await api.post("/v1/organization/transfer", { new_owner_id: veteran.userId, password: ownerAccount.password });
    expect(res.status).toBe(200);
    expect(res.body.data.owner).toMatchObject({ role: "owner", user: { id: veteran.userId } });
    expect(res.body.data.previous_owner).toMatchObject({ role: "admin", user: { id: ownerAccount.user.id } });

    for (const c of [api, api2]) expect((await c.patch("/v1/organization", { plan: "pro" })).status).toBe(403);
    const back = await api.post("/v1/organization/transfer", { new_owner_id: ownerAccount.user.id, password: ownerAccount.password });
    expect(back.status).toBe(403);

    newOwner = createApi(stack.baseUrl);
    const login = await newOwner.post("/v1/auth/token", {
      email: veteran.email,
      password: ownerAccount.password,
      organization_id: ownerAccount.organization.id,
    });
    newOwner.setToken(login.body.data.access_token);
    expect((await newOwner.patch("/v1/organization", { name: "Handed Over" })).status).toBe(200);
  });

  it("deletes the organization only once it has no live databases, and every credential of it dies", async () => {
    const db = await newOwner.post("/v1/databases", { name: "last-one", region: "fsn1", tier: "micro" });
    expect(db.status).toBe(201);
    const refused = await newOwner.delete("/v1/organization");
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toBe("the organization still has 1 database; delete them first");
    expect((await newOwner.delete(`/v1/databases/${db.body.data.id}`)).status).toBe(204);
    expect((await newOwner.delete("/v1/organization")).status).toBe(204);
    for (const c of [newOwner, api, api2]) expect((await c.get("/v1/organization")).status).toBe(401);
  });
});
