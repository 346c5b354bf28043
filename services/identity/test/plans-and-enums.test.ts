import { Code } from "@connectrpc/connect";
import { Plan, Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { actor, addMember, createHarness, expectError, signupUser, violations, type Harness } from "./harness.ts";

/**
 * Issue 11: the plan rule lives in identity (a plan change needs billing:write
 * among the actor's permissions, the actor required as on every mutation), and
 * plans and roles cross the wire as enums, the deprecated names still read.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("UpdateOrganization decides who may change the plan", () => {
  it("refuses a plan change to a credential without billing:write, whatever the plan, changing nothing", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const admin = await addMember(h, org, "admin");
    const as = actor(admin.user.id, "admin");
    expect(as.permissions).not.toContain("billing:write");
    for (const plan of [Plan.FREE, Plan.PRO]) {
      const err = await expectError(
        h.client.updateOrganization({ organizationId: org, actor: as, name: "Taken Over", planEnum: plan }),
        Code.PermissionDenied,
      );
      expect(err.rawMessage).toBe("this action requires the billing:write permission");
    }
    // An owner's key scoped away from billing:write is refused too: permissions, not the role, decide.
    const narrow = actor(owner.user!.id, "owner", ["members:read", "settings:write"]);
    await expectError(h.client.updateOrganization({ organizationId: org, actor: narrow, plan: "pro" }), Code.PermissionDenied);
    expect((await h.client.getOrganization({ organizationId: org })).organization).toMatchObject({
      name: owner.organization!.name,
      planEnum: Plan.FREE,
    });
    // The rename alone is the admin's to make (settings:write is the gateway route's guard).
    const renamed = await h.client.updateOrganization({ organizationId: org, actor: as, name: "Renamed By Admin" });
    expect(renamed.organization).toMatchObject({ name: "Renamed By Admin", plan: "free", planEnum: Plan.FREE });
  });

  it("needs the actor of an end user's call; only support acts without one", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const err = await expectError(h.client.updateOrganization({ organizationId: org, planEnum: Plan.PRO }), Code.InvalidArgument);
    expect(violations(err)).toEqual([{ field: "actor", message: "user_id and role are required" }]);
  });

  it("takes plan_enum, which wins over the deprecated name; an unknown or UNSPECIFIED plan is refused", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const res = await h.client.updateOrganization({ organizationId: org, actor: as, planEnum: Plan.ENTERPRISE, plan: "pro" });
    expect(res.organization).toMatchObject({ plan: "enterprise", planEnum: Plan.ENTERPRISE });
    const principal = (await h.client.authenticate({ bearer: owner.token!.accessToken })).principal!;
    expect(principal).toMatchObject({ plan: "enterprise", planEnum: Plan.ENTERPRISE });
    for (const planEnum of [Plan.UNSPECIFIED, 42 as Plan, Plan.INTERNAL]) {
      const bad = await expectError(h.client.updateOrganization({ organizationId: org, actor: as, planEnum }), Code.InvalidArgument);
      expect(violations(bad)).toEqual([{ field: "plan", message: "must be one of: free, pro, enterprise" }]);
    }
  });
});

describe("roles by enum", () => {
  it("UpdateMember and CreateInvitation take role_enum, which wins over the deprecated name", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const dev = await addMember(h, org, "developer");
    const { member } = await h.client.updateMember({
      organizationId: org,
      actor: as,
      memberId: dev.memberId,
      roleEnum: Role.VIEWER,
      role: "admin",
    });
    expect(member!.role).toBe(Role.VIEWER);
    const { invitation } = await h.client.createInvitation({
      organizationId: org,
      actor: as,
      email: `enum-${Date.now()}@example.com`,
      roleEnum: Role.ADMIN,
    });
    expect(invitation!.role).toBe(Role.ADMIN);
    const owned = await expectError(
      h.client.updateMember({ organizationId: org, actor: as, memberId: dev.memberId, roleEnum: Role.OWNER }),
      Code.InvalidArgument,
    );
    expect(violations(owned)).toEqual([
      { field: "role", message: "owner is reached only by transferring ownership (POST /v1/organization/transfer)" },
    ]);
    const unknown = await expectError(
      h.client.updateMember({ organizationId: org, actor: as, memberId: dev.memberId, roleEnum: 9 as Role }),
      Code.InvalidArgument,
    );
    expect(violations(unknown)).toEqual([{ field: "role", message: "must be one of: admin, developer, viewer" }]);
  });
});
