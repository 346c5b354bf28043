import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCOPES } from "../src/authz.ts";
import { hashSecret } from "../src/credentials.ts";
import { addMember, createHarness, expectError, PASSWORD, signupInput, signupUser, violations, type Harness } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("Signup", () => {
  it("creates user, free organization, owner membership and a token that authenticates", async () => {
    const input = signupInput({ name: "  Ada Lovelace  ", organizationName: " Analytical " });
    const res = await h.client.signup(input);
    expect(res.user!.id).toMatch(/^user-[a-z0-9]{16}$/);
    expect(res.user!.email).toBe(input.email);
    expect(res.user!.name).toBe("Ada Lovelace");
    expect(res.organization!.id).toMatch(/^org-/);
    expect(res.organization!.name).toBe("Analytical");
    expect(res.organization!.plan).toBe("free");
    expect(res.token!.tokenType).toBe("Bearer");
    expect(res.token!.accessToken).toMatch(/^dbs_[0-9A-Za-z]{43}$/);
    expect(timestampDate(res.token!.expiresAt!).getTime() - h.clock.now().getTime()).toBe(3600_000);

    const { principal } = await h.client.authenticate({ bearer: res.token!.accessToken });
    expect(principal!.userId).toBe(res.user!.id);
    expect(principal!.organizationId).toBe(res.organization!.id);
    expect(principal!.role).toBe(Role.OWNER);
    expect(principal!.plan).toBe("free");
    expect(principal!.credentialKind).toBe("session");
    expect(principal!.credentialId).toMatch(/^tok-/);
    expect(principal!.scopes).toEqual([...SCOPES]);
    expect(principal!.permissions).toEqual([...SCOPES]);
    expect(principal!.expiresAt).toEqual(res.token!.expiresAt);

    const membership = await h.ctx.pool.query("SELECT id, role FROM memberships WHERE user_id = $1", [res.user!.id]);
    expect(membership.rows).toEqual([{ id: expect.stringMatching(/^member-/), role: "owner" }]);
  });

  it("stores neither the password nor the token in clear", async () => {
    const res = await signupUser(h);
    const user = await h.ctx.pool.query("SELECT password_hash FROM users WHERE id = $1", [res.user!.id]);
    expect(user.rows[0].password_hash).toMatch(/^scrypt\$16384\$8\$1\$/);
    expect(user.rows[0].password_hash).not.toContain(PASSWORD);
    const sessions = await h.ctx.pool.query(
      "SELECT s.token_hash FROM sessions s JOIN memberships m ON m.id = s.membership_id WHERE m.user_id = $1",
      [res.user!.id],
    );
    expect(sessions.rows).toEqual([{ token_hash: hashSecret(res.token!.accessToken) }]);
  });

  it("reports one violation per invalid field", async () => {
    const err = await expectError(
      h.client.signup({ email: "not-an-email", password: "short", name: "   ", organizationName: "x".repeat(101) }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([
      { field: "email", message: "must be a valid e-mail address" },
      { field: "password", message: "must be at least 8 characters" },
      { field: "name", message: "is required" },
      { field: "organization_name", message: "must be at most 100 characters" },
    ]);
  });

  it("names missing fields and over-long passwords", async () => {
    const missing = await expectError(h.client.signup({}), Code.InvalidArgument);
    expect(violations(missing).map((v) => [v.field, v.message])).toEqual([
      ["email", "is required"],
      ["password", "is required"],
      ["name", "is required"],
      ["organization_name", "is required"],
    ]);
    const long = await expectError(h.client.signup(signupInput({ password: "p".repeat(257) })), Code.InvalidArgument);
    expect(violations(long)).toEqual([{ field: "password", message: "must be at most 256 characters" }]);
  });

  it("accepts boundary lengths", async () => {
    const res = await h.client.signup(signupInput({ password: "12345678", name: "n".repeat(100), organizationName: "o" }));
    expect(res.user!.name).toHaveLength(100);
  });

  it("refuses an e-mail already registered, whatever its case, and writes nothing", async () => {
    const first = await signupUser(h);
    const before = await h.ctx.pool.query("SELECT count(*)::int AS n FROM organizations");
    const err = await expectError(h.client.signup(signupInput({ email: `  ${first.user!.email.toUpperCase()} ` })), Code.AlreadyExists);
    expect(err.rawMessage).toBe("an account with this e-mail already exists");
    const after = await h.ctx.pool.query("SELECT count(*)::int AS n FROM organizations");
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it("lets only one of two simultaneous signups with one e-mail through", async () => {
    const input = signupInput();
    const results = await Promise.allSettled([h.client.signup(input), h.client.signup({ ...input, email: input.email.toUpperCase() })]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const users = await h.ctx.pool.query("SELECT count(*)::int AS n FROM users WHERE lower(email) = lower($1)", [input.email]);
    expect(users.rows[0].n).toBe(1);
  });
});

describe("CreateToken", () => {
  it("logs in with e-mail in any case and returns a Bearer token for one hour", async () => {
    const s = await signupUser(h);
    const { token } = await h.client.createToken({ email: s.user!.email.toUpperCase(), password: PASSWORD });
    expect(token!.tokenType).toBe("Bearer");
    expect(token!.accessToken).not.toBe(s.token!.accessToken);
    expect(timestampDate(token!.expiresAt!).getTime()).toBe(h.clock.now().getTime() + 3600_000);
    const { principal } = await h.client.authenticate({ bearer: token!.accessToken });
    expect(principal!.organizationId).toBe(s.organization!.id);
  });

  it("refuses a wrong password and an unknown e-mail with the same message", async () => {
    const s = await signupUser(h);
    const wrong = await expectError(h.client.createToken({ email: s.user!.email, password: "wrong password" }), Code.Unauthenticated);
    const unknown = await expectError(h.client.createToken({ email: "nobody@example.com", password: PASSWORD }), Code.Unauthenticated);
    expect(wrong.rawMessage).toBe("invalid e-mail or password");
    expect(unknown.rawMessage).toBe(wrong.rawMessage);
  });

  it("requires e-mail and password", async () => {
    const err = await expectError(h.client.createToken({ email: " " }), Code.InvalidArgument);
    expect(violations(err).map((v) => v.field)).toEqual(["email", "password"]);
  });

  it("acts in the requested organization, and hides organizations the user is not in", async () => {
    const owner = await signupUser(h);
    const dev = await addMember(h, owner.organization!.id, "developer");
    const { principal } = await h.client.authenticate({ bearer: dev.accessToken });
    expect(principal!.organizationId).toBe(owner.organization!.id);
    expect(principal!.role).toBe(Role.DEVELOPER);

    const stranger = await signupUser(h);
    const err = await expectError(
      h.client.createToken({ email: stranger.user!.email, password: PASSWORD, organizationId: owner.organization!.id }),
      Code.NotFound,
    );
    expect(err.rawMessage).toBe("organization not found");
  });

  it("locks an e-mail out after 10 failures in 15 minutes, counting unknown e-mails alike", async () => {
    const s = await signupUser(h);
    const email = s.user!.email;
    for (let i = 0; i < 10; i++) {
      await expectError(h.client.createToken({ email, password: `wrong ${i}` }), Code.Unauthenticated);
      h.clock.advance(10);
    }
    const locked = await expectError(h.client.createToken({ email, password: PASSWORD }), Code.ResourceExhausted);
    // The first failure was 100 s ago, so the window frees up in 800 s.
    expect(locked.rawMessage).toBe("too many failed logins; try again in 800 seconds");
    // Other accounts are unaffected.
    const other = await signupUser(h);
    await h.client.createToken({ email: other.user!.email, password: PASSWORD });

    h.clock.advance(799);
    await expectError(h.client.createToken({ email, password: PASSWORD }), Code.ResourceExhausted);
    h.clock.advance(1);
    await h.client.createToken({ email: email.toUpperCase(), password: PASSWORD });

    const unknown = "ghost@example.com";
    for (let i = 0; i < 10; i++) await expectError(h.client.createToken({ email: unknown, password: "x" }), Code.Unauthenticated);
    await expectError(h.client.createToken({ email: unknown, password: "x" }), Code.ResourceExhausted);
  });

  it("forgets failures after a successful login", async () => {
    const s = await signupUser(h);
    for (let i = 0; i < 9; i++) await expectError(h.client.createToken({ email: s.user!.email, password: "nope" }), Code.Unauthenticated);
    await h.client.createToken({ email: s.user!.email, password: PASSWORD });
    for (let i = 0; i < 9; i++) await expectError(h.client.createToken({ email: s.user!.email, password: "nope" }), Code.Unauthenticated);
    await h.client.createToken({ email: s.user!.email, password: PASSWORD });
  });

  it("does not let a burst of simultaneous guesses exceed the limit", async () => {
    const s = await signupUser(h);
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, () => h.client.createToken({ email: s.user!.email, password: "guess" })),
    );
    const checked = results.filter((r) => r.status === "rejected" && (r.reason as { code: Code }).code === Code.Unauthenticated);
    expect(checked.length).toBeLessThanOrEqual(10);
  });
});

describe("Authenticate", () => {
  it("says an expired login token expired", async () => {
    const s = await signupUser(h);
    h.clock.advance(3599);
    await h.client.authenticate({ bearer: s.token!.accessToken });
    h.clock.advance(1);
    const err = await expectError(h.client.authenticate({ bearer: s.token!.accessToken }), Code.Unauthenticated);
    expect(err.rawMessage).toBe("token expired");
  });

  it("refuses unknown and malformed bearers", async () => {
    const unknown = await expectError(h.client.authenticate({ bearer: "dbs_" + "A".repeat(43) }), Code.Unauthenticated);
    expect(unknown.rawMessage).toBe("invalid token");
    for (const bearer of ["", "garbage", "dbs_" + "A".repeat(42)]) {
      await expectError(h.client.authenticate({ bearer }), Code.Unauthenticated);
    }
  });

  it("stops a session at once when its membership is removed", async () => {
    const owner = await signupUser(h);
    const admin = await addMember(h, owner.organization!.id, "admin");
    await h.client.authenticate({ bearer: admin.accessToken });
    await h.ctx.pool.query("DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2", [owner.organization!.id, admin.user.id]);
    const err = await expectError(h.client.authenticate({ bearer: admin.accessToken }), Code.Unauthenticated);
    expect(err.rawMessage).toBe("invalid token");
  });

  it("follows a role change on the next call", async () => {
    const owner = await signupUser(h);
    const member = await addMember(h, owner.organization!.id, "admin");
    await h.ctx.pool.query("UPDATE memberships SET role = 'viewer' WHERE user_id = $1 AND organization_id = $2", [
      member.user.id,
      owner.organization!.id,
    ]);
    const { principal } = await h.client.authenticate({ bearer: member.accessToken });
    expect(principal!.role).toBe(Role.VIEWER);
    expect(principal!.permissions).toEqual(["databases:read", "metrics:read", "members:read"]);
  });

  it("computes permissions for each role's login token", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const expected = {
      admin: SCOPES.filter((s) => s !== "billing:write" && s !== "organization:delete"),
      developer: ["databases:read", "databases:write", "backups:write", "metrics:read", "members:read"],
      viewer: ["databases:read", "metrics:read", "members:read"],
    } as const;
    for (const role of ["admin", "developer", "viewer"] as const) {
      const m = await addMember(h, org, role);
      const { principal } = await h.client.authenticate({ bearer: m.accessToken });
      expect(principal!.scopes, role).toEqual([...SCOPES]);
      expect(principal!.permissions, role).toEqual(expected[role]);
    }
  });
});

describe("GetOrganization", () => {
  it("returns the organization, or NOT_FOUND", async () => {
    const s = await signupUser(h);
    const { organization } = await h.client.getOrganization({ organizationId: s.organization!.id });
    expect(organization).toEqual(s.organization);
    await expectError(h.client.getOrganization({ organizationId: "org-missing" }), Code.NotFound);
    const err = await expectError(h.client.getOrganization({}), Code.InvalidArgument);
    expect(violations(err)).toEqual([{ field: "organization_id", message: "is required" }]);
  });
});
