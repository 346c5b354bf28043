import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "../src/credentials.ts";
import { actor, addMember, createHarness, expectError, PASSWORD, signupInput, signupUser, violations, type Harness } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ PUBLIC_BASE_URL: "https://console.example.com/" });
});
afterAll(async () => {
  await h?.close();
});

const WEEK_MS = 7 * 24 * 3600 * 1000;

async function ownerOrg() {
  const owner = await signupUser(h);
  return { owner, org: owner.organization!.id, as: actor(owner.user!.id, "owner") };
}

/** Sends what the outbox holds and returns the one-time token from the mail to `email`. */
async function tokenMailedTo(email: string): Promise<string> {
  await h.ctx.mailRelay.runOnce();
  const mail = h.mail.sent.findLast((m) => m.to === email);
  if (!mail) throw new Error(`no mail to ${email}`);
  const m = /^https:\/\/console\.example\.com\/join\?token=(dbi_[0-9A-Za-z]{43})$/.exec(mail.link ?? "");
  if (!m) throw new Error(`unexpected link ${mail.link}`);
  expect(mail.text).toContain(mail.link);
  return m[1]!;
}

function freshEmail(): string {
  return signupInput().email;
}

describe("CreateInvitation", () => {
  it("returns a pending invitation for 7 days and queues a sealed mail with a one-time link", async () => {
    const { owner, org, as } = await ownerOrg();
    const email = freshEmail();
    const { invitation } = await h.client.createInvitation({ organizationId: org, actor: as, email: ` ${email} `, role: "developer" });
    expect(invitation!.id).toMatch(/^invite-[a-z0-9]{16}$/);
    expect(invitation).toMatchObject({ email, role: Role.DEVELOPER, status: "pending", invitedBy: owner.user!.id });
    expect(timestampDate(invitation!.createdAt!)).toEqual(h.clock.now());
    expect(timestampDate(invitation!.expiresAt!).getTime()).toBe(h.clock.now().getTime() + WEEK_MS);

    const outbox = await h.ctx.pool.query("SELECT recipient, subject, sealed_body, sent_at FROM mail_outbox WHERE invitation_id = $1", [
      invitation!.id,
    ]);
    expect(outbox.rows).toHaveLength(1);
    expect(outbox.rows[0]).toMatchObject({ recipient: email, sent_at: null });
    expect(outbox.rows[0].subject).toBe(`${owner.user!.name} invited you to ${owner.organization!.name}`);
    expect(outbox.rows[0].sealed_body.toString("latin1")).not.toContain("dbi_");

    const token = await tokenMailedTo(email);
    const mail = h.mail.sent.at(-1)!;
    expect(mail.text).toContain(`invited you to join the organization "${owner.organization!.name}" as developer`);
    expect(mail.messageId).toMatch(/^[a-z0-9]{24}@dbaas$/);
    const stored = await h.ctx.pool.query("SELECT token_hash FROM invitations WHERE id = $1", [invitation!.id]);
    expect(stored.rows[0].token_hash).toEqual(hashSecret(token));
    // Once sent, the body (and the token in it) is gone from the database.
    const after = await h.ctx.pool.query("SELECT sealed_body, sent_at FROM mail_outbox WHERE invitation_id = $1", [invitation!.id]);
    expect(after.rows[0].sealed_body).toBeNull();
    expect(after.rows[0].sent_at).toEqual(h.clock.now());
  });

  it("writes neither invitation nor mail when it fails", async () => {
    const { org, as } = await ownerOrg();
    const before = await h.ctx.pool.query("SELECT count(*)::int AS n FROM mail_outbox");
    await expectError(h.client.createInvitation({ organizationId: org, actor: as, email: "bad", role: "admin" }), Code.InvalidArgument);
    await expectError(
      h.client.createInvitation({ organizationId: "org-gone", actor: as, email: freshEmail(), role: "admin" }),
      Code.NotFound,
    );
    const after = await h.ctx.pool.query("SELECT count(*)::int AS n FROM mail_outbox");
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it("refuses owner, unknown roles and bad addresses, one violation per field", async () => {
    const { org, as } = await ownerOrg();
    const err = await expectError(
      h.client.createInvitation({ organizationId: org, actor: as, email: "nope", role: "owner" }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([
      { field: "email", message: "must be a valid e-mail address" },
      { field: "role", message: "owner is reached only by transferring ownership (POST /v1/organization/transfer)" },
    ]);
    const missing = await expectError(h.client.createInvitation({ organizationId: org, actor: as }), Code.InvalidArgument);
    expect(violations(missing)).toEqual([
      { field: "email", message: "is required" },
      { field: "role", message: "is required" },
    ]);
  });

  it("lets nobody offer a role above their own credential's", async () => {
    const { org } = await ownerOrg();
    const dev = await addMember(h, org, "developer");
    const err = await expectError(
      h.client.createInvitation({ organizationId: org, actor: actor(dev.user.id, "developer"), email: freshEmail(), role: "admin" }),
      Code.PermissionDenied,
    );
    expect(err.rawMessage).toBe("the developer role cannot grant the admin role");
    const admin = await addMember(h, org, "admin");
    await h.client.createInvitation({ organizationId: org, actor: actor(admin.user.id, "admin"), email: freshEmail(), role: "admin" });
  });

  it("refuses an existing member and an address with a pending invitation, whatever the case", async () => {
    const { owner, org, as } = await ownerOrg();
    const member = await expectError(
      h.client.createInvitation({ organizationId: org, actor: as, email: owner.user!.email.toUpperCase(), role: "viewer" }),
      Code.AlreadyExists,
    );
    expect(member.rawMessage).toBe(`${owner.user!.email.toUpperCase()} is already a member of this organization`);
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const pending = await expectError(
      h.client.createInvitation({ organizationId: org, actor: as, email: email.toUpperCase(), role: "admin" }),
      Code.AlreadyExists,
    );
    expect(pending.rawMessage).toContain("already has a pending invitation");
    // Another organization may invite the same address.
    const other = await ownerOrg();
    await h.client.createInvitation({ organizationId: other.org, actor: other.as, email, role: "viewer" });
  });

  it("lets only one of two simultaneous invitations of one address through", async () => {
    const { org, as } = await ownerOrg();
    const email = freshEmail();
    const results = await Promise.allSettled([
      h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" }),
      h.client.createInvitation({ organizationId: org, actor: as, email, role: "developer" }),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  it("allows a new invitation once the old one expired; the new one replaces it", async () => {
    const { org, as } = await ownerOrg();
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const oldToken = await tokenMailedTo(email);
    h.clock.advance(WEEK_MS / 1000);
    const second = await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const { invitations } = await h.client.listInvitations({ organizationId: org });
    expect(invitations.map((i) => [i.id, i.status])).toEqual([[second.invitation!.id, "pending"]]);
    const err = await expectError(h.client.acceptInvitation({ token: oldToken, name: "Old", password: PASSWORD }), Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/^invitation expired at /);
    await h.client.acceptInvitation({ token: await tokenMailedTo(email), name: "New", password: PASSWORD });
  });
});

describe("ListInvitations / CancelInvitation", () => {
  it("lists pending and expired invitations of the organization only", async () => {
    const { org, as } = await ownerOrg();
    const other = await ownerOrg();
    await h.client.createInvitation({ organizationId: other.org, actor: other.as, email: freshEmail(), role: "viewer" });
    const a = await h.client.createInvitation({ organizationId: org, actor: as, email: freshEmail(), role: "viewer" });
    h.clock.advance(WEEK_MS / 1000 - 1);
    const b = await h.client.createInvitation({ organizationId: org, actor: as, email: freshEmail(), role: "admin" });
    const accepted = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email: accepted, role: "admin" });
    await h.client.acceptInvitation({ token: await tokenMailedTo(accepted), name: "A", password: PASSWORD });
    h.clock.advance(1);
    const { invitations } = await h.client.listInvitations({ organizationId: org });
    expect(invitations.map((i) => [i.id, i.status])).toEqual([
      [a.invitation!.id, "expired"],
      [b.invitation!.id, "pending"],
    ]);
  });

  it("cancels: gone from the list, its unsent mail withdrawn, its token refused", async () => {
    const { org, as } = await ownerOrg();
    const sentEmail = freshEmail();
    const sent = await h.client.createInvitation({ organizationId: org, actor: as, email: sentEmail, role: "viewer" });
    const token = await tokenMailedTo(sentEmail);
    const unsent = await h.client.createInvitation({ organizationId: org, actor: as, email: freshEmail(), role: "viewer" });

    await h.client.cancelInvitation({ organizationId: org, id: sent.invitation!.id });
    await h.client.cancelInvitation({ organizationId: org, id: unsent.invitation!.id });
    expect((await h.client.listInvitations({ organizationId: org })).invitations).toEqual([]);
    const outbox = await h.ctx.pool.query("SELECT invitation_id FROM mail_outbox WHERE invitation_id = ANY($1)", [
      [sent.invitation!.id, unsent.invitation!.id],
    ]);
    expect(outbox.rows).toEqual([{ invitation_id: sent.invitation!.id }]);

    const err = await expectError(h.client.acceptInvitation({ token, name: "Late", password: PASSWORD }), Code.NotFound);
    expect(err.rawMessage).toBe("invitation was cancelled");
    await expectError(h.client.cancelInvitation({ organizationId: org, id: sent.invitation!.id }), Code.NotFound);
  });

  it("answers NOT_FOUND for another organization's invitation and leaves it alone", async () => {
    const { org } = await ownerOrg();
    const other = await ownerOrg();
    const theirs = await h.client.createInvitation({ organizationId: other.org, actor: other.as, email: freshEmail(), role: "viewer" });
    const err = await expectError(h.client.cancelInvitation({ organizationId: org, id: theirs.invitation!.id }), Code.NotFound);
    expect(err.rawMessage).toBe("invitation not found");
    expect((await h.client.listInvitations({ organizationId: other.org })).invitations).toHaveLength(1);
  });
});

describe("AcceptInvitation", () => {
  it("creates the user, joins with the offered role and logs in there", async () => {
    const { owner, org, as } = await ownerOrg();
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "developer" });
    const res = await h.client.acceptInvitation({ token: await tokenMailedTo(email), name: "  New Person ", password: "a new password" });
    expect(res.organization).toEqual(owner.organization);
    expect(res.member).toMatchObject({ role: Role.DEVELOPER, user: { email, name: "New Person" } });
    expect(res.member!.id).toMatch(/^member-/);
    const { principal } = await h.client.authenticate({ bearer: res.token!.accessToken });
    expect(principal).toMatchObject({ organizationId: org, role: Role.DEVELOPER, userId: res.member!.user!.id });
    // The password is the new user's own: they can log in with it.
    await h.client.createToken({ email, password: "a new password" });
    const { members } = await h.client.listMembers({ organizationId: org });
    expect(members.map((m) => m.user!.email)).toContain(email);
  });

  it("joins an existing account with that account's password, keeping its name", async () => {
    const { org, as } = await ownerOrg();
    const elsewhere = await signupUser(h);
    const email = elsewhere.user!.email;
    await h.client.createInvitation({ organizationId: org, actor: as, email: email.toUpperCase(), role: "admin" });
    const token = await tokenMailedTo(email.toUpperCase());

    const wrong = await expectError(
      h.client.acceptInvitation({ token, name: "Ignored", password: "not the password" }),
      Code.Unauthenticated,
    );
    expect(wrong.rawMessage).toBe(`${email.toUpperCase()} already has an account: password must be that account's password`);

    const res = await h.client.acceptInvitation({ token, name: "Ignored", password: PASSWORD });
    expect(res.member).toMatchObject({ role: Role.ADMIN, user: { id: elsewhere.user!.id, name: elsewhere.user!.name } });
    // Still a member of their own organization too; a login picks either.
    const { token: home } = await h.client.createToken({ email, password: PASSWORD, organizationId: elsewhere.organization!.id });
    expect((await h.client.authenticate({ bearer: home!.accessToken })).principal!.role).toBe(Role.OWNER);
  });

  it("uses a token once", async () => {
    const { org, as } = await ownerOrg();
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const token = await tokenMailedTo(email);
    await h.client.acceptInvitation({ token, name: "Once", password: PASSWORD });
    const err = await expectError(h.client.acceptInvitation({ token, name: "Twice", password: PASSWORD }), Code.AlreadyExists);
    expect(err.rawMessage).toBe("invitation was already accepted");
  });

  it("lets only one of two simultaneous accepts through", async () => {
    const { org, as } = await ownerOrg();
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const token = await tokenMailedTo(email);
    const results = await Promise.allSettled([
      h.client.acceptInvitation({ token, name: "One", password: PASSWORD }),
      h.client.acceptInvitation({ token, name: "Two", password: PASSWORD }),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const users = await h.ctx.pool.query("SELECT count(*)::int AS n FROM users WHERE lower(email) = lower($1)", [email]);
    expect(users.rows[0].n).toBe(1);
  });

  it("refuses an expired token", async () => {
    const { org, as } = await ownerOrg();
    const email = freshEmail();
    const { invitation } = await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const token = await tokenMailedTo(email);
    h.clock.advance(WEEK_MS / 1000);
    const err = await expectError(h.client.acceptInvitation({ token, name: "Late", password: PASSWORD }), Code.FailedPrecondition);
    expect(err.rawMessage).toBe(`invitation expired at ${timestampDate(invitation!.expiresAt!).toISOString()}; ask for a new one`);
    const users = await h.ctx.pool.query("SELECT 1 FROM users WHERE lower(email) = lower($1)", [email]);
    expect(users.rowCount).toBe(0);
  });

  it("refuses unknown and malformed tokens, and validates a new user's fields", async () => {
    await expectError(h.client.acceptInvitation({ token: "dbi_" + "A".repeat(43), name: "X", password: PASSWORD }), Code.NotFound);
    await expectError(h.client.acceptInvitation({ token: "garbage", name: "X", password: PASSWORD }), Code.NotFound);
    const missing = await expectError(h.client.acceptInvitation({}), Code.InvalidArgument);
    expect(violations(missing).map((v) => v.field)).toEqual(["token", "password"]);

    const { org, as } = await ownerOrg();
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const token = await tokenMailedTo(email);
    const bad = await expectError(h.client.acceptInvitation({ token, name: " ", password: "short" }), Code.InvalidArgument);
    expect(violations(bad)).toEqual([
      { field: "name", message: "is required" },
      { field: "password", message: "must be at least 8 characters" },
    ]);
    // Refusals do not use the token up.
    await h.client.acceptInvitation({ token, name: "Valid", password: PASSWORD });
  });

  it("refuses to join an organization deleted meanwhile", async () => {
    const { org, as } = await ownerOrg();
    const email = freshEmail();
    await h.client.createInvitation({ organizationId: org, actor: as, email, role: "viewer" });
    const token = await tokenMailedTo(email);
    await h.client.deleteOrganization({ organizationId: org, actor: as });
    await expectError(h.client.acceptInvitation({ token, name: "Late", password: PASSWORD }), Code.NotFound);
  });
});
