import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  actor,
  addMember,
  createHarness,
  expectError,
  memberIdOf,
  PASSWORD,
  signupUser,
  violations,
  watchFeed,
  type Harness,
} from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

async function team() {
  const owner = await signupUser(h);
  const org = owner.organization!.id;
  // A second apart, so "oldest first" has an order to show.
  h.clock.advance(1);
  const admin = await addMember(h, org, "admin");
  h.clock.advance(1);
  const dev = await addMember(h, org, "developer");
  h.clock.advance(1);
  const viewer = await addMember(h, org, "viewer");
  return { owner, org, ownerMemberId: await memberIdOf(h, org, owner.user!.id), admin, dev, viewer };
}

describe("ListMembers", () => {
  it("lists every member with user and role, oldest first, and nobody from elsewhere", async () => {
    const t = await team();
    const viewerJoined = h.clock.now();
    await team();
    const { members } = await h.client.listMembers({ organizationId: t.org });
    expect(members.map((m) => [m.user!.id, m.role])).toEqual([
      [t.owner.user!.id, Role.OWNER],
      [t.admin.user.id, Role.ADMIN],
      [t.dev.user.id, Role.DEVELOPER],
      [t.viewer.user.id, Role.VIEWER],
    ]);
    expect(members[0]).toMatchObject({
      id: t.ownerMemberId,
      user: { id: t.owner.user!.id, email: t.owner.user!.email, name: t.owner.user!.name },
    });
    expect(members[0]!.id).toMatch(/^member-/);
    expect(timestampDate(members[3]!.joinedAt!)).toEqual(viewerJoined);
  });
});

describe("UpdateMember", () => {
  it("changes a role, takes effect on the next Authenticate and tells the revocation feed", async () => {
    const t = await team();
    const sub = watchFeed(h);
    try {
      const { member } = await h.client.updateMember({
        organizationId: t.org,
        actor: actor(t.admin.user.id, "admin"),
        memberId: t.dev.memberId,
        role: "viewer",
      });
      expect(member).toMatchObject({ id: t.dev.memberId, role: Role.VIEWER, user: { id: t.dev.user.id } });
      expect((await h.client.authenticate({ bearer: t.dev.accessToken })).principal!.role).toBe(Role.VIEWER);
      expect(await sub.drain()).toEqual([{ organizationId: t.org, userId: t.dev.user.id, credentialId: "" }]);
    } finally {
      sub.close();
    }
  });

  it("refuses owner as a role, unknown roles, and missing fields, per field", async () => {
    const t = await team();
    const owner = await expectError(
      h.client.updateMember({ organizationId: t.org, actor: actor(t.owner.user!.id, "owner"), memberId: t.admin.memberId, role: "owner" }),
      Code.InvalidArgument,
    );
    expect(violations(owner)).toEqual([
      { field: "role", message: "owner is reached only by transferring ownership (POST /v1/organization/transfer)" },
    ]);
    const unknown = await expectError(
      h.client.updateMember({ organizationId: t.org, actor: actor(t.owner.user!.id, "owner"), memberId: t.admin.memberId, role: "root" }),
      Code.InvalidArgument,
    );
    expect(violations(unknown)).toEqual([{ field: "role", message: "must be one of: admin, developer, viewer" }]);
    const missing = await expectError(h.client.updateMember({}), Code.InvalidArgument);
    expect(violations(missing).map((v) => v.field)).toEqual(["organization_id", "actor", "member_id", "role"]);
  });

  it("never changes the owner's role", async () => {
    const t = await team();
    const err = await expectError(
      h.client.updateMember({ organizationId: t.org, actor: actor(t.owner.user!.id, "owner"), memberId: t.ownerMemberId, role: "admin" }),
      Code.FailedPrecondition,
    );
    expect(err.rawMessage).toBe("the owner's role cannot be changed; transfer ownership instead");
    expect((await h.client.authenticate({ bearer: t.owner.token!.accessToken })).principal!.role).toBe(Role.OWNER);
  });

  it("lets nobody grant a role above their own credential's role", async () => {
    const t = await team();
    const err = await expectError(
      h.client.updateMember({
        organizationId: t.org,
        actor: actor(t.dev.user.id, "developer"),
        memberId: t.viewer.memberId,
        role: "admin",
      }),
      Code.PermissionDenied,
    );
    expect(err.rawMessage).toBe("the developer role cannot grant the admin role");
    await expectError(
      h.client.updateMember({
        organizationId: t.org,
        actor: actor(t.dev.user.id, "developer"),
        memberId: t.admin.memberId,
        role: "viewer",
      }),
      Code.PermissionDenied,
    );
  });

  it("answers NOT_FOUND for another organization's member", async () => {
    const t = await team();
    const other = await team();
    await expectError(
      h.client.updateMember({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "owner"),
        memberId: other.admin.memberId,
        role: "viewer",
      }),
      Code.NotFound,
    );
    const { principal } = await h.client.authenticate({ bearer: other.admin.accessToken });
    expect(principal!.role).toBe(Role.ADMIN);
  });
});

describe("RemoveMember", () => {
  it("ends the member's sessions at once, keeps their API keys, and tells the revocation feed", async () => {
    const t = await team();
    const { secret } = await h.client.createApiKey({ organizationId: t.org, actor: actor(t.admin.user.id, "admin"), name: "ops" });
    const sub = watchFeed(h);
    try {
      await h.client.removeMember({ organizationId: t.org, actor: actor(t.owner.user!.id, "owner"), memberId: t.admin.memberId });
      const err = await expectError(h.client.authenticate({ bearer: t.admin.accessToken }), Code.Unauthenticated);
      expect(err.rawMessage).toBe("invalid token");
      expect((await h.client.authenticate({ bearer: secret })).principal!.role).toBe(Role.ADMIN);
      expect(await sub.drain()).toEqual([{ organizationId: t.org, userId: t.admin.user.id, credentialId: "" }]);
    } finally {
      sub.close();
    }
    const { members } = await h.client.listMembers({ organizationId: t.org });
    expect(members.map((m) => m.id)).not.toContain(t.admin.memberId);
    // Logging in again does not bring the membership back.
    await expectError(h.client.createToken({ email: t.admin.user.email, password: PASSWORD, organizationId: t.org }), Code.NotFound);
  });

  it("never removes the owner, and answers NOT_FOUND for a stranger's member id", async () => {
    const t = await team();
    const err = await expectError(
      h.client.removeMember({ organizationId: t.org, actor: actor(t.admin.user.id, "admin"), memberId: t.ownerMemberId }),
      Code.FailedPrecondition,
    );
    expect(err.rawMessage).toBe("the owner cannot be removed; transfer ownership first");
    const other = await team();
    await expectError(
      h.client.removeMember({ organizationId: t.org, actor: actor(t.owner.user!.id, "owner"), memberId: other.dev.memberId }),
      Code.NotFound,
    );
    await h.client.authenticate({ bearer: other.dev.accessToken });
  });

  it("lets a member leave", async () => {
    const t = await team();
    await h.client.removeMember({ organizationId: t.org, actor: actor(t.admin.user.id, "admin"), memberId: t.admin.memberId });
    await expectError(h.client.authenticate({ bearer: t.admin.accessToken }), Code.Unauthenticated);
  });
});

describe("TransferOwnership", () => {
  it("makes the member owner and the old owner admin, with the caller's password", async () => {
    const t = await team();
    const sub = watchFeed(h);
    try {
      const res = await h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "owner"),
        newOwnerId: t.dev.user.id,
        password: PASSWORD,
      });
      expect(res.owner).toMatchObject({ id: t.dev.memberId, role: Role.OWNER, user: { id: t.dev.user.id } });
      expect(res.previousOwner).toMatchObject({ id: t.ownerMemberId, role: Role.ADMIN, user: { id: t.owner.user!.id } });
      const events = await sub.drain();
      expect(events.map((e) => e.userId).sort()).toEqual([t.owner.user!.id, t.dev.user.id].sort());
    } finally {
      sub.close();
    }
    expect((await h.client.authenticate({ bearer: t.owner.token!.accessToken })).principal!.role).toBe(Role.ADMIN);
    expect((await h.client.authenticate({ bearer: t.dev.accessToken })).principal!.role).toBe(Role.OWNER);

    // Irreversible for the former owner: an admin cannot take it back, nor be made owner by role change.
    await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "admin"),
        newOwnerId: t.owner.user!.id,
        password: PASSWORD,
      }),
      Code.PermissionDenied,
    );
    await expectError(
      h.client.updateMember({ organizationId: t.org, actor: actor(t.dev.user.id, "owner"), memberId: t.dev.memberId, role: "viewer" }),
      Code.FailedPrecondition,
    );
    const owners = await h.ctx.pool.query("SELECT user_id FROM memberships WHERE organization_id = $1 AND role = 'owner'", [t.org]);
    expect(owners.rows).toEqual([{ user_id: t.dev.user.id }]);
  });

  it("refuses a wrong password, and writes nothing", async () => {
    const t = await team();
    const err = await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "owner"),
        newOwnerId: t.admin.user.id,
        password: "not it at all",
      }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([{ field: "password", message: "is not your current password" }]);
    const { members } = await h.client.listMembers({ organizationId: t.org });
    expect(members.find((m) => m.role === Role.OWNER)!.user!.id).toBe(t.owner.user!.id);
  });

  it("counts wrong passwords towards the login lockout", async () => {
    const t = await team();
    for (let i = 0; i < 10; i++) {
      await expectError(
        h.client.transferOwnership({
          organizationId: t.org,
          actor: actor(t.owner.user!.id, "owner"),
          newOwnerId: t.admin.user.id,
          password: `guess ${i}`,
        }),
        Code.InvalidArgument,
      );
    }
    await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "owner"),
        newOwnerId: t.admin.user.id,
        password: PASSWORD,
      }),
      Code.ResourceExhausted,
    );
    await expectError(h.client.createToken({ email: t.owner.user!.email, password: PASSWORD }), Code.ResourceExhausted);
  });

  it("is for the owner only, to a member only", async () => {
    const t = await team();
    const admin = await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.admin.user.id, "admin"),
        newOwnerId: t.admin.user.id,
        password: PASSWORD,
      }),
      Code.PermissionDenied,
    );
    expect(admin.rawMessage).toBe("only the owner can transfer ownership");
    // An admin credential of the owner (a key made before they owned the organization) is not enough either.
    await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "admin"),
        newOwnerId: t.admin.user.id,
        password: PASSWORD,
      }),
      Code.PermissionDenied,
    );
    const stranger = await signupUser(h);
    const notMember = await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "owner"),
        newOwnerId: stranger.user!.id,
        password: PASSWORD,
      }),
      Code.InvalidArgument,
    );
    expect(violations(notMember)).toEqual([{ field: "new_owner_id", message: "must be the user id of a member of this organization" }]);
    const self = await expectError(
      h.client.transferOwnership({
        organizationId: t.org,
        actor: actor(t.owner.user!.id, "owner"),
        newOwnerId: t.owner.user!.id,
        password: PASSWORD,
      }),
      Code.InvalidArgument,
    );
    expect(violations(self)).toEqual([{ field: "new_owner_id", message: "is already the owner" }]);
    const missing = await expectError(
      h.client.transferOwnership({ organizationId: t.org, actor: actor(t.owner.user!.id, "owner") }),
      Code.InvalidArgument,
    );
    expect(violations(missing).map((v) => v.field)).toEqual(["new_owner_id", "password"]);
  });
});
