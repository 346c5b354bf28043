/**
 * Organization and team routes through the gateway against the real identity
 * service: the public shapes of docs/product.md, Identity, and the Member and Invitation schemas of /v1/openapi.json, the rules, and the revocation
 * feed making a removal, demotion, key revocation or plan change take effect
 * on the very next request at two gateways with warm principal caches.
 */
import { DatabasesService } from "@dbaas/proto/databases";
import { Role } from "@dbaas/proto/identity";
import { createInternalClient } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, waitForRevocationFeed, type TestGateway } from "./support/gateway.ts";
import { createWorld, mailedToken, PASSWORD, startRealIdentity, uniqueEmail, type RealIdentity } from "./support/identity.ts";
import { SECRET, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let identity: RealIdentity;
let gw1: TestGateway;
let gw2: TestGateway;

beforeAll(async () => {
  stubs = await startStubs();
  identity = await startRealIdentity(stubs);
  gw1 = await startGateway({ ...stubs, identityUrl: identity.url });
  gw2 = await startGateway({ ...stubs, identityUrl: identity.url });
  await waitForRevocationFeed(gw1);
  await waitForRevocationFeed(gw2);
}, 60_000);

afterAll(async () => {
  await gw1?.close();
  await gw2?.close();
  await identity?.close();
  await stubs?.close();
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Both gateways answer `status` for `token` on a cheap route. */
async function expectBoth(token: string, status: number, path = "/v1/organization") {
  for (const gw of [gw1, gw2]) {
    const res = await api(gw.url, path, { token });
    expect(res.status, `${gw.url}${path}: ${res.text}`).toBe(status);
    if (status === 401) expect(res.body.error.code).toBe("invalid_token");
  }
}

describe("organization", () => {
  it("GET shows id, name, plan; PATCH renames (admin) but the plan is the owner's", async () => {
    const w = await createWorld(identity, "Shapes");
    const got = await api(gw1.url, "/v1/organization", { token: w.users.viewer.token });
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual({ id: w.org, name: "Shapes", plan: "enterprise", created_at: expect.stringMatching(ISO) });

    const foreign = await api(gw1.url, "/v1/organization", {
      method: "PATCH",
      token: w.users.admin.token,
      body: { name: "Renamed", id: "org-other" },
    });
    expect(foreign.status).toBe(422); // issue 10: fields a request does not take are refused
    const renamed = await api(gw1.url, "/v1/organization", { method: "PATCH", token: w.users.admin.token, body: { name: "Renamed" } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ id: w.org, name: "Renamed" });

    const plan = await api(gw1.url, "/v1/organization", { method: "PATCH", token: w.users.admin.token, body: { plan: "free" } });
    expect(plan.status).toBe(403);
    expect(plan.body.error).toMatchObject({
      code: "insufficient_permissions",
      message: "this action requires the billing:write permission",
    });

    const bad = await api(gw1.url, "/v1/organization", { method: "PATCH", token: w.users.owner.token, body: { plan: "gold", name: "" } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details).toEqual([
      { field: "name", message: "is required" },
      { field: "plan", message: "must be one of: free, pro, enterprise" },
    ]);
  });

  it("a paid plan needs a payment method (402); the change sets the rate limit of the very next request, at both gateways", async () => {
    const w = await createWorld(identity, "Plans");
    for (const gw of [gw1, gw2]) {
      expect((await api(gw.url, "/v1/organization", { token: w.users.admin.token })).headers.get("x-ratelimit-limit")).toBe("10000");
    }
    const refused = await api(gw1.url, "/v1/organization", { method: "PATCH", token: w.users.owner.token, body: { plan: "pro" } });
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe("payment_required");
    const card = { type: "card", token: "tok_visa" };
    expect((await api(gw1.url, "/v1/billing/payment-methods", { method: "POST", token: w.users.owner.token, body: card })).status).toBe(
      201,
    );
    const res = await api(gw1.url, "/v1/organization", { method: "PATCH", token: w.users.owner.token, body: { plan: "pro" } });
    expect(res.body.data.plan).toBe("pro");
    for (const gw of [gw1, gw2]) {
      expect((await api(gw.url, "/v1/organization", { token: w.users.admin.token })).headers.get("x-ratelimit-limit")).toBe("1000");
    }
  });

  it("DELETE: only without live databases; then every session and key of it is dead at both gateways", async () => {
    const w = await createWorld(identity, "Doomed");
    const key = await api(gw1.url, "/v1/organization/api-keys", { method: "POST", token: w.users.owner.token, body: { name: "k" } });
    const db = await createInternalClient(DatabasesService, stubs.databasesUrl, { secret: SECRET, caller: "test" }).createDatabase({
      organizationId: w.org,
      name: "left-over",
      region: "fsn1",
      tier: "micro",
    });
    for (const token of [w.users.owner.token, w.users.viewer.token, key.body.data.secret]) await expectBoth(token, 200);

    const refused = await api(gw1.url, "/v1/organization", { method: "DELETE", token: w.users.owner.token });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({
      code: "resource_conflict",
      message: "the organization still has 1 database; delete them first",
    });
    expect((await api(gw1.url, "/v1/organization", { method: "DELETE", token: w.users.admin.token })).status).toBe(403);

    expect((await api(gw1.url, `/v1/databases/${db.database!.id}`, { method: "DELETE", token: w.users.owner.token })).status).toBe(204);
    expect((await api(gw1.url, "/v1/organization", { method: "DELETE", token: w.users.owner.token })).status).toBe(204);
    for (const token of [w.users.owner.token, w.users.viewer.token, key.body.data.secret]) await expectBoth(token, 401);
  });
});

describe("members", () => {
  it("lists member records of the Member schema of /v1/openapi.json, paged", async () => {
    const w = await createWorld(identity, "Listing");
    const res = await api(gw1.url, "/v1/organization/members?per_page=3", { token: w.users.viewer.token });
    expect(res.status).toBe(200);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 3, total: 4, total_pages: 2 });
    expect(res.body.data.members[0]).toEqual({
      id: w.users.owner.memberId,
      user: { id: w.users.owner.id, email: w.users.owner.email, name: "Owner" },
      role: "owner",
      joined_at: expect.stringMatching(ISO),
    });
    expect(res.body.data.members.map((m: { id: string }) => m.id)).toEqual(expect.arrayContaining([expect.stringMatching(/^member-/)]));
  });

  it("PATCH changes a role (200 member) and the demoted member's next request already has the new role", async () => {
    const w = await createWorld(identity, "Demote");
    const invite = { method: "POST", body: { email: uniqueEmail("x"), role: "viewer" } };
    // Warm both caches with the admin principal.
    await expectBoth(w.users.admin.token, 200);
    const res = await api(gw1.url, `/v1/organization/members/${w.users.admin.memberId}`, {
      method: "PATCH",
      token: w.users.owner.token,
      body: { role: "viewer" },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: w.users.admin.memberId, role: "viewer", user: { id: w.users.admin.id } });
    for (const gw of [gw1, gw2]) {
      const denied = await api(gw.url, "/v1/organization/members", { ...invite, token: w.users.admin.token });
      expect(denied.status).toBe(403);
    }
  });

  it("refuses owner as a role (422), changing or removing the owner (409)", async () => {
    const w = await createWorld(identity, "Rules");
    const toOwner = await api(gw1.url, `/v1/organization/members/${w.users.admin.memberId}`, {
      method: "PATCH",
      token: w.users.owner.token,
      body: { role: "owner" },
    });
    expect(toOwner.status).toBe(422);
    // Refused by the gateway's enum now (issue 10), with identity's explanation.
    expect(toOwner.body.error.details).toEqual([
      {
        field: "role",
        message:
          "must be one of: admin, developer, viewer; owner is reached only by transferring ownership (POST /v1/organization/transfer)",
      },
    ]);
    const demote = await api(gw1.url, `/v1/organization/members/${w.users.owner.memberId}`, {
      method: "PATCH",
      token: w.users.admin.token,
      body: { role: "viewer" },
    });
    expect(demote.status).toBe(409);
    expect(demote.body.error.code).toBe("resource_conflict");
    const remove = await api(gw1.url, `/v1/organization/members/${w.users.owner.memberId}`, {
      method: "DELETE",
      token: w.users.admin.token,
    });
    expect(remove.status).toBe(409);
    expect(remove.body.error.message).toBe("the owner cannot be removed; transfer ownership first");
  });

  it("DELETE ends the member's sessions at both gateways at once; their API key keeps working until revoked", async () => {
    const w = await createWorld(identity, "Removal");
    const key = await api(gw1.url, "/v1/organization/api-keys", {
      method: "POST",
      token: w.users.admin.token,
      body: { name: "admin's key" },
    });
    expect(key.status).toBe(201);
    const secret: string = key.body.data.secret;
    await expectBoth(w.users.admin.token, 200);
    await expectBoth(secret, 200);

    expect(
      (await api(gw1.url, `/v1/organization/members/${w.users.admin.memberId}`, { method: "DELETE", token: w.users.owner.token })).status,
    ).toBe(204);
    await expectBoth(w.users.admin.token, 401);
    await expectBoth(secret, 200);
    const viaKey = await api(gw2.url, "/v1/organization/members", { token: secret });
    expect(viaKey.body.data.members.map((m: { id: string }) => m.id)).not.toContain(w.users.admin.memberId);

    expect(
      (await api(gw2.url, `/v1/organization/api-keys/${key.body.data.id}`, { method: "DELETE", token: w.users.owner.token })).status,
    ).toBe(204);
    await expectBoth(secret, 401);
    expect(
      (await api(gw1.url, `/v1/organization/members/${w.users.admin.memberId}`, { method: "DELETE", token: w.users.owner.token })).status,
    ).toBe(404);
  });
});

describe("invitations", () => {
  it("POST returns the pending invitation of the Invitation schema of /v1/openapi.json, 7 days; fields it does not take are refused (issue 10)", async () => {
    const w = await createWorld(identity, "Invites");
    const other = await createWorld(identity, "Elsewhere");
    const email = uniqueEmail("invitee");
    const before = Date.now();
    const foreign = await api(gw1.url, "/v1/organization/members", {
      method: "POST",
      token: w.users.admin.token,
      body: {
        email,
        role: "developer",
        organization_id: other.org,
        status: "accepted",
        id: "invite-mine",
        expires_at: "2099-01-01T00:00:00Z",
      },
    });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.details.map((d: { field: string }) => d.field)).toEqual(["organization_id", "status", "id", "expires_at"]);
    const res = await api(gw1.url, "/v1/organization/members", {
      method: "POST",
      token: w.users.admin.token,
      body: { email, role: "developer" },
    });
    expect(res.status).toBe(201);
    const inv = res.body.data;
    expect(inv).toEqual({
      id: expect.stringMatching(/^invite-[a-z0-9]{16}$/),
      email,
      role: "developer",
      status: "pending",
      expires_at: expect.stringMatching(ISO),
      created_at: expect.stringMatching(ISO),
    });
    const week = Date.parse(inv.expires_at) - Date.parse(inv.created_at);
    expect(week).toBe(7 * 24 * 3600 * 1000);
    expect(Date.parse(inv.created_at)).toBeGreaterThanOrEqual(before - 1000);

    const listed = await api(gw1.url, "/v1/organization/invitations", { token: w.users.viewer.token });
    expect(listed.body.data.invitations).toEqual([inv]);
    expect((await api(gw1.url, "/v1/organization/invitations", { token: other.users.owner.token })).body.data.invitations).toEqual([]);

    const again = await api(gw1.url, "/v1/organization/members", {
      method: "POST",
      token: w.users.owner.token,
      body: { email, role: "viewer" },
    });
    expect(again.status).toBe(409);
    const member = await api(gw1.url, "/v1/organization/members", {
      method: "POST",
      token: w.users.owner.token,
      body: { email: w.users.viewer.email, role: "viewer" },
    });
    expect(member.status).toBe(409);
    const owner = await api(gw1.url, "/v1/organization/members", {
      method: "POST",
      token: w.users.owner.token,
      body: { email: uniqueEmail("o"), role: "owner" },
    });
    expect(owner.status).toBe(422);
  });

  it("accept joins with a login token; the token is one-time; a cancelled one is 404", async () => {
    const w = await createWorld(identity, "Accepting");
    const email = uniqueEmail("joiner");
    await api(gw1.url, "/v1/organization/members", { method: "POST", token: w.users.owner.token, body: { email, role: "viewer" } });
    const token = await mailedToken(identity, email);
    const res = await api(gw1.url, "/v1/invitations/accept", { method: "POST", body: { token, name: "Joiner", password: PASSWORD } });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      organization: { id: w.org, name: "Accepting", plan: "enterprise", created_at: expect.stringMatching(ISO) },
      member: {
        id: expect.stringMatching(/^member-/),
        user: { id: expect.stringMatching(/^user-/), email, name: "Joiner" },
        role: "viewer",
        joined_at: expect.stringMatching(ISO),
      },
      access_token: expect.stringMatching(/^dbs_/),
      token_type: "Bearer",
      expires_at: expect.stringMatching(ISO),
    });
    expect((await api(gw1.url, "/v1/organization/members", { token: res.body.data.access_token })).status).toBe(200);

    const reused = await api(gw1.url, "/v1/invitations/accept", { method: "POST", body: { token, name: "Joiner", password: PASSWORD } });
    expect(reused.status).toBe(409);
    expect(reused.body.error).toMatchObject({ code: "resource_conflict", message: "invitation was already accepted" });

    const email2 = uniqueEmail("cancelled");
    const inv = await api(gw1.url, "/v1/organization/members", {
      method: "POST",
      token: w.users.owner.token,
      body: { email: email2, role: "viewer" },
    });
    const token2 = await mailedToken(identity, email2);
    expect(
      (await api(gw1.url, `/v1/organization/invitations/${inv.body.data.id}`, { method: "DELETE", token: w.users.admin.token })).status,
    ).toBe(204);
    const cancelled = await api(gw1.url, "/v1/invitations/accept", {
      method: "POST",
      body: { token: token2, name: "Late", password: PASSWORD },
    });
    expect(cancelled.status).toBe(404);
    expect(cancelled.body.error).toMatchObject({ code: "resource_not_found", message: "invitation was cancelled" });

    const missing = await api(gw1.url, "/v1/invitations/accept", { method: "POST", body: {} });
    expect(missing.status).toBe(422);
    expect(missing.body.error.details.map((d: { field: string }) => d.field)).toEqual(["token", "password"]);
  });
});

describe("transfer", () => {
  it("makes a member owner (200 {owner, previous_owner}); the old owner is admin at once", async () => {
    const w = await createWorld(identity, "Transfer");
    await expectBoth(w.users.owner.token, 200, "/v1/billing/usage");
    const wrong = await api(gw1.url, "/v1/organization/transfer", {
      method: "POST",
      token: w.users.owner.token,
      body: { new_owner_id: w.users.developer.id, password: "not my password" },
    });
    expect(wrong.status).toBe(422);
    expect(wrong.body.error.details).toEqual([{ field: "password", message: "is not your current password" }]);
    const byAdmin = await api(gw1.url, "/v1/organization/transfer", {
      method: "POST",
      token: w.users.admin.token,
      body: { new_owner_id: w.users.admin.id, password: PASSWORD },
    });
    expect(byAdmin.status).toBe(403);
    const stranger = await createWorld(identity, "Stranger");
    const toStranger = await api(gw1.url, "/v1/organization/transfer", {
      method: "POST",
      token: w.users.owner.token,
      body: { new_owner_id: stranger.users.owner.id, password: PASSWORD },
    });
    expect(toStranger.status).toBe(422);

    const res = await api(gw1.url, "/v1/organization/transfer", {
      method: "POST",
      token: w.users.owner.token,
      body: { new_owner_id: w.users.developer.id, password: PASSWORD },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      owner: {
        id: w.users.developer.memberId,
        user: expect.objectContaining({ id: w.users.developer.id }),
        role: "owner",
        joined_at: expect.stringMatching(ISO),
      },
      previous_owner: {
        id: w.users.owner.memberId,
        user: expect.objectContaining({ id: w.users.owner.id }),
        role: "admin",
        joined_at: expect.stringMatching(ISO),
      },
    });
    // Billing management went with ownership, at both gateways.
    for (const gw of [gw1, gw2]) {
      const plan = await api(gw.url, "/v1/organization", { method: "PATCH", token: w.users.owner.token, body: { plan: "pro" } });
      expect(plan.status).toBe(403);
    }
    const back = await api(gw1.url, "/v1/organization/transfer", {
      method: "POST",
      token: w.users.owner.token,
      body: { new_owner_id: w.users.owner.id, password: PASSWORD },
    });
    expect(back.status).toBe(403);
    const members = (await identity.client.listMembers({ organizationId: w.org })).members;
    expect(members.filter((m) => m.role === Role.OWNER).map((m) => m.user!.id)).toEqual([w.users.developer.id]);
  });
});
