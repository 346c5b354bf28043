import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { actor, addMember, createHarness, expectError, PASSWORD, signupUser, violations, watchFeed, type Harness } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("UpdateOrganization", () => {
  it("renames and changes the plan; the new plan shows on the next Authenticate", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const renamed = await h.client.updateOrganization({ organizationId: org, actor: as, name: "  Renamed  " });
    expect(renamed.organization).toMatchObject({ id: org, name: "Renamed", plan: "free" });
    const sub = watchFeed(h);
    try {
      const upgraded = await h.client.updateOrganization({ organizationId: org, actor: as, plan: "enterprise" });
      expect(upgraded.organization).toMatchObject({ name: "Renamed", plan: "enterprise" });
      expect(await sub.drain()).toEqual([{ organizationId: org, userId: "", credentialId: "" }]);
    } finally {
      sub.close();
    }
    expect((await h.client.authenticate({ bearer: owner.token!.accessToken })).principal!.plan).toBe("enterprise");
    expect((await h.client.getOrganization({ organizationId: org })).organization).toMatchObject({
      id: org,
      name: "Renamed",
      plan: "enterprise",
    });
  });

  it("refuses unknown plans and bad names, per field, changing nothing", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const err = await expectError(
      h.client.updateOrganization({ organizationId: org, actor: as, name: "", plan: "platinum" }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([
      { field: "name", message: "is required" },
      { field: "plan", message: "must be one of: free, pro, enterprise" },
    ]);
    expect((await h.client.getOrganization({ organizationId: org })).organization).toEqual(owner.organization);
    await expectError(h.client.updateOrganization({ organizationId: "org-missing", actor: as, name: "x" }), Code.NotFound);
  });
});

describe("UpdateOrganization to a paid plan", () => {
  it("needs a default payment method: without one it is payment_required and the plan stays", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    h.billing.withoutPaymentMethod.add(org);
    for (const plan of ["pro", "enterprise"]) {
      const err = await expectError(h.client.updateOrganization({ organizationId: org, actor: as, plan }), Code.FailedPrecondition);
      expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
    }
    // A rename in the same request is not applied either.
    await expectError(
      h.client.updateOrganization({ organizationId: org, actor: as, name: "Renamed", plan: "pro" }),
      Code.FailedPrecondition,
    );
    expect((await h.client.getOrganization({ organizationId: org })).organization).toMatchObject({
      plan: "free",
      name: owner.organization!.name,
    });
    h.billing.withoutPaymentMethod.delete(org);
    expect((await h.client.updateOrganization({ organizationId: org, actor: as, plan: "pro" })).organization!.plan).toBe("pro");
  });

  it("keeps an organization with a past-due invoice on its plan, saying why", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    h.billing.withPastDueInvoice.add(org);
    try {
      const err = await expectError(h.client.updateOrganization({ organizationId: org, actor: as, plan: "pro" }), Code.FailedPrecondition);
      expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
      expect(err.rawMessage).toMatch(/invoice is past due/);
    } finally {
      h.billing.withPastDueInvoice.delete(org);
    }
  });

  it("asks billing only for a move to a paid plan: renames, the same plan and going back to free do not", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    await h.client.updateOrganization({ organizationId: org, actor: as, plan: "pro" });
    h.billing.asked.length = 0;
    h.billing.failure = new ConnectError("billing is down", Code.Unavailable);
    try {
      await h.client.updateOrganization({ organizationId: org, actor: as, name: "Still Pro", plan: "pro" });
      expect((await h.client.updateOrganization({ organizationId: org, actor: as, plan: "free" })).organization!.plan).toBe("free");
      expect(h.billing.asked).toEqual([]);
      // A failed dependency (the API's 503), never UNAVAILABLE, which the internal client would resend.
      const err = await expectError(h.client.updateOrganization({ organizationId: org, actor: as, plan: "enterprise" }), Code.Aborted);
      expect(err.rawMessage).not.toMatch(/billing is down/);
    } finally {
      h.billing.failure = undefined;
    }
  });
});

describe("revocations are acknowledged", () => {
  it("a revoking call answers only once the subscriber acknowledged the revocation", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const sub = h.ctx.revocations.subscribe()!;
    try {
      let answered = false;
      const call = h.client.updateOrganization({ organizationId: org, actor: as, plan: "pro" }).then(() => (answered = true));
      const got = await sub.next(1000, new AbortController().signal);
      if (typeof got === "string") throw new Error(`expected a revocation, got ${got}`);
      expect(got.revocation).toEqual({ organizationId: org, userId: "", credentialId: "" });
      await new Promise((r) => setTimeout(r, 300));
      expect(answered).toBe(false);
      const acked = Date.now();
      h.ctx.revocations.ack(sub.id, got.seq);
      await call;
      expect(Date.now() - acked).toBeLessThan(300);
    } finally {
      sub.close();
    }
  });

  it("cuts off a subscriber that does not acknowledge in time, and the call goes on", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const sub = h.ctx.revocations.subscribe()!;
    try {
      const started = Date.now();
      await h.client.updateOrganization({ organizationId: org, actor: as, plan: "pro" });
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(Date.now() - started).toBeLessThan(3_000);
      const signal = new AbortController().signal;
      expect(await sub.next(100, signal)).toMatchObject({ revocation: { organizationId: org }, seq: 1 });
      // Its stream ends: its gateway stops trusting its cache and subscribes afresh.
      expect(await sub.next(100, signal)).toBe("closed");
    } finally {
      sub.close();
    }
  });
});

describe("DeleteOrganization", () => {
  it("deletes the organization with every membership, session, key and invitation of it", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const dev = await addMember(h, org, "developer");
    const { secret } = await h.client.createApiKey({ organizationId: org, actor: as, name: "k" });
    await h.client.createInvitation({ organizationId: org, actor: as, email: "later@example.com", role: "viewer" });

    const sub = watchFeed(h);
    try {
      await h.client.deleteOrganization({ organizationId: org, actor: as });
      expect(await sub.drain()).toEqual([{ organizationId: org, userId: "", credentialId: "" }]);
    } finally {
      sub.close();
    }
    for (const bearer of [owner.token!.accessToken, dev.accessToken, secret]) {
      await expectError(h.client.authenticate({ bearer }), Code.Unauthenticated);
    }
    await expectError(h.client.getOrganization({ organizationId: org }), Code.NotFound);
    for (const table of ["memberships", "api_keys", "invitations"]) {
      const left = await h.ctx.pool.query(`SELECT 1 FROM ${table} WHERE organization_id = $1`, [org]);
      expect(left.rowCount, table).toBe(0);
    }
    const mail = await h.ctx.pool.query("SELECT 1 FROM mail_outbox WHERE recipient = 'later@example.com'");
    expect(mail.rowCount).toBe(0);
    // The users remain; without an organization they cannot log in anywhere.
    const login = await expectError(h.client.createToken({ email: owner.user!.email, password: PASSWORD }), Code.PermissionDenied);
    expect(login.rawMessage).toBe("this account is not a member of any organization");
  });

  it("refuses while the organization has live databases, asking the databases service", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    h.databases.totals.set(org, 2);
    const err = await expectError(
      h.client.deleteOrganization({ organizationId: org, actor: actor(owner.user!.id, "owner") }),
      Code.FailedPrecondition,
    );
    expect(err.rawMessage).toBe("the organization still has 2 databases; delete them first");
    await h.client.authenticate({ bearer: owner.token!.accessToken });
    h.databases.totals.set(org, 0);
    await h.client.deleteOrganization({ organizationId: org, actor: actor(owner.user!.id, "owner") });
  });

  it("answers a failed dependency (ABORTED, the API's 503), whatever the databases service said, when it cannot be asked", async () => {
    const owner = await signupUser(h);
    h.databases.failure = new ConnectError("missing or invalid internal credential", Code.Unauthenticated);
    try {
      const err = await expectError(
        h.client.deleteOrganization({ organizationId: owner.organization!.id, actor: actor(owner.user!.id, "owner") }),
        Code.Aborted,
      );
      expect(err.rawMessage).toBe("could not check the organization's databases; try again shortly");
    } finally {
      h.databases.failure = undefined;
    }
    await h.client.getOrganization({ organizationId: owner.organization!.id });
  });

  it("is the owner's alone", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const admin = await addMember(h, org, "admin");
    await expectError(h.client.deleteOrganization({ organizationId: org, actor: actor(admin.user.id, "admin") }), Code.PermissionDenied);
    await h.client.getOrganization({ organizationId: org });
  });
});

describe("DeleteOrganization without DATABASES_URL", () => {
  it("refuses rather than guess whether databases are left", async () => {
    const bare = await createHarness();
    try {
      bare.ctx.databases = undefined;
      const owner = await signupUser(bare);
      const err = await expectError(
        bare.client.deleteOrganization({ organizationId: owner.organization!.id, actor: actor(owner.user!.id, "owner") }),
        Code.Unimplemented,
      );
      expect(err.rawMessage).toBe("organization deletion is not available");
      await bare.client.getOrganization({ organizationId: owner.organization!.id });
    } finally {
      await bare.close();
    }
  });
});
