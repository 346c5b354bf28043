import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { Role } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { SCOPES } from "../src/authz.ts";
import { hashSecret } from "../src/credentials.ts";
import { actor, addMember, createHarness, expectError, signupUser, violations, type Harness } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("CreateApiKey / Authenticate / RevokeApiKey", () => {
  it("creates a key that authenticates as the organization, then stops once revoked", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    const created = await h.client.createApiKey({ organizationId: org, actor: as, name: " ci deploy " });
    const key = created.apiKey!;
    expect(key.id).toMatch(/^key-[a-z0-9]{16}$/);
    expect(key.name).toBe("ci deploy");
    expect(key.scopes).toEqual([...SCOPES]);
    expect(key.role).toBe(Role.OWNER);
    expect(key.createdBy).toBe(owner.user!.id);
    expect(key.expiresAt).toBeUndefined();
    expect(created.secret).toMatch(/^dbk_[0-9A-Za-z]{36}$/);
    expect(key.prefix).toBe(created.secret.slice(0, 8));

    const stored = await h.ctx.pool.query("SELECT secret_hash FROM api_keys WHERE id = $1", [key.id]);
    expect(stored.rows[0].secret_hash).toEqual(hashSecret(created.secret));

    const { principal } = await h.client.authenticate({ bearer: created.secret });
    expect(principal).toMatchObject({
      userId: owner.user!.id,
      organizationId: org,
      role: Role.OWNER,
      plan: "free",
      credentialKind: "api_key",
      credentialId: key.id,
      scopes: [...SCOPES],
      permissions: [...SCOPES],
    });
    expect(principal!.expiresAt).toBeUndefined();

    const { apiKeys } = await h.client.listApiKeys({ organizationId: org, actor: as });
    expect(apiKeys).toEqual([key]);

    await h.client.revokeApiKey({ organizationId: org, id: key.id, actor: as });
    const err = await expectError(h.client.authenticate({ bearer: created.secret }), Code.Unauthenticated);
    expect(err.rawMessage).toBe("API key revoked");
    expect((await h.client.listApiKeys({ organizationId: org, actor: as })).apiKeys).toEqual([]);
    await expectError(h.client.revokeApiKey({ organizationId: org, id: key.id, actor: as }), Code.NotFound);
  });

  it("refuses to revoke or list another organization's key", async () => {
    const a = await signupUser(h);
    const b = await signupUser(h);
    const { apiKey, secret } = await h.client.createApiKey({
      organizationId: a.organization!.id,
      actor: actor(a.user!.id, "owner"),
      name: "k",
    });
    const asB = actor(b.user!.id, "owner");
    const err = await expectError(h.client.revokeApiKey({ organizationId: b.organization!.id, id: apiKey!.id, actor: asB }), Code.NotFound);
    expect(err.rawMessage).toBe("API key not found");
    expect((await h.client.listApiKeys({ organizationId: b.organization!.id, actor: asB })).apiKeys).toEqual([]);
    await h.client.authenticate({ bearer: secret });
  });

  it("limits a scoped key to its scopes within its role", async () => {
    const owner = await signupUser(h);
    const dev = await addMember(h, owner.organization!.id, "developer");
    const { apiKey, secret } = await h.client.createApiKey({
      organizationId: owner.organization!.id,
      actor: actor(dev.user.id, "developer"),
      name: "read only",
      scopes: ["metrics:read", "databases:read", "metrics:read"],
    });
    expect(apiKey!.scopes).toEqual(["databases:read", "metrics:read"]);
    const { principal } = await h.client.authenticate({ bearer: secret });
    expect(principal!.role).toBe(Role.DEVELOPER);
    expect(principal!.scopes).toEqual(["databases:read", "metrics:read"]);
    expect(principal!.permissions).toEqual(["databases:read", "metrics:read"]);
  });

  it("defaults a key's scopes to what the creator's role allows", async () => {
    const owner = await signupUser(h);
    const viewer = await addMember(h, owner.organization!.id, "viewer");
    const { apiKey, secret } = await h.client.createApiKey({
      organizationId: owner.organization!.id,
      actor: actor(viewer.user.id, "viewer"),
      name: "v",
    });
    expect(apiKey!.scopes).toEqual(["databases:read", "metrics:read", "members:read"]);
    expect((await h.client.authenticate({ bearer: secret })).principal!.permissions).toEqual(apiKey!.scopes);
  });

  it("refuses scopes beyond the creator's role, unknown scopes, bad names and past expiry", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const dev = await addMember(h, org, "developer");
    // A credential that holds more than the role now allows: an admin's key, its creator since demoted.
    const beyond = await expectError(
      h.client.createApiKey({
        organizationId: org,
        actor: actor(dev.user.id, "admin"),
        name: "k",
        scopes: ["databases:write", "billing:read", "members:write"],
      }),
      Code.InvalidArgument,
    );
    expect(violations(beyond)).toEqual([{ field: "scopes", message: "the developer role does not allow: members:write, billing:read" }]);

    const several = await expectError(
      h.client.createApiKey({
        organizationId: org,
        actor: actor(owner.user!.id, "owner"),
        name: "",
        scopes: ["databases:read", "root"],
        expiresAt: timestampFromDate(h.clock.now()),
      }),
      Code.InvalidArgument,
    );
    expect(violations(several).map((v) => v.field)).toEqual(["name", "scopes", "expires_at"]);
    expect(violations(several)[1]!.message).toContain("unknown scope(s) root");

    const ids = await expectError(h.client.createApiKey({ name: "k" }), Code.InvalidArgument);
    expect(violations(ids).map((v) => v.field)).toEqual(["organization_id", "actor"]);
  });

  it("refuses to create a key for someone who is not a member", async () => {
    const a = await signupUser(h);
    const b = await signupUser(h);
    await expectError(
      h.client.createApiKey({ organizationId: a.organization!.id, actor: actor(b.user!.id, "owner"), name: "k" }),
      Code.PermissionDenied,
    );
  });

  it("expires a key at its expires_at", async () => {
    const owner = await signupUser(h);
    const expiry = new Date(h.clock.now().getTime() + 60_000);
    const { secret } = await h.client.createApiKey({
      organizationId: owner.organization!.id,
      actor: actor(owner.user!.id, "owner"),
      name: "short",
      expiresAt: timestampFromDate(expiry),
    });
    const { principal } = await h.client.authenticate({ bearer: secret });
    expect(principal!.expiresAt).toEqual(timestampFromDate(expiry));
    h.clock.advance(60);
    const err = await expectError(h.client.authenticate({ bearer: secret }), Code.Unauthenticated);
    expect(err.rawMessage).toBe("API key expired");
  });

  it("keeps a key working with its creation role after the creator is removed or demoted", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const admin = await addMember(h, org, "admin");
    const { secret } = await h.client.createApiKey({ organizationId: org, actor: actor(admin.user.id, "admin"), name: "ops" });
    await h.ctx.pool.query("DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2", [org, admin.user.id]);
    await expectError(h.client.authenticate({ bearer: admin.accessToken }), Code.Unauthenticated);
    const { principal } = await h.client.authenticate({ bearer: secret });
    expect(principal!.role).toBe(Role.ADMIN);
    expect(principal!.permissions).toContain("members:write");
    expect(principal!.permissions).not.toContain("billing:write");
  });

  it("rejects a key with a bad checksum without touching the database", async () => {
    const owner = await signupUser(h);
    const { secret } = await h.client.createApiKey({
      organizationId: owner.organization!.id,
      actor: actor(owner.user!.id, "owner"),
      name: "k",
    });
    const last = secret.at(-1) === "0" ? "1" : "0";
    const tampered = secret.slice(0, -1) + last;
    const query = vi.spyOn(h.ctx.pool, "query");
    const connect = vi.spyOn(h.ctx.pool, "connect");
    try {
      const err = await expectError(h.client.authenticate({ bearer: tampered }), Code.Unauthenticated);
      expect(err.rawMessage).toBe("invalid token");
      expect(query).not.toHaveBeenCalled();
      expect(connect).not.toHaveBeenCalled();
      // The same spy sees the lookup a well-formed key causes, so the assertion above can fail.
      await h.client.authenticate({ bearer: secret });
      expect(query).toHaveBeenCalledTimes(1);
    } finally {
      query.mockRestore();
      connect.mockRestore();
    }
  });
});

describe("keys for every member (docs/product.md, Identity)", () => {
  /** An organization with one member of each role, and the Actor of each one's login session. */
  async function team() {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const admin = await addMember(h, org, "admin");
    const developer = await addMember(h, org, "developer");
    const viewer = await addMember(h, org, "viewer");
    return {
      org,
      as: {
        owner: actor(owner.user!.id, "owner"),
        admin: actor(admin.user.id, "admin"),
        developer: actor(developer.user.id, "developer"),
        viewer: actor(viewer.user.id, "viewer"),
      },
    };
  }

  // Keys made at the same instant (the test clock stands still) list in id order.
  const ids = (keys: { id: string }[]) => keys.map((k) => k.id).sort();

  it("lets developers and viewers create keys, capped by their role; they list only their own, owner and admin everyone's", async () => {
    const t = await team();
    const mine: Record<string, string> = {};
    for (const role of ["owner", "admin", "developer", "viewer"] as const) {
      const { apiKey, secret } = await h.client.createApiKey({ organizationId: t.org, actor: t.as[role], name: `${role}'s key` });
      mine[role] = apiKey!.id;
      const { principal } = await h.client.authenticate({ bearer: secret });
      expect(principal!.userId).toBe(t.as[role].userId);
    }
    const all = [mine.owner, mine.admin, mine.developer, mine.viewer].sort();
    expect(ids((await h.client.listApiKeys({ organizationId: t.org, actor: t.as.owner })).apiKeys)).toEqual(all);
    expect(ids((await h.client.listApiKeys({ organizationId: t.org, actor: t.as.admin })).apiKeys)).toEqual(all);
    expect(ids((await h.client.listApiKeys({ organizationId: t.org, actor: t.as.developer })).apiKeys)).toEqual([mine.developer]);
    expect(ids((await h.client.listApiKeys({ organizationId: t.org, actor: t.as.viewer })).apiKeys)).toEqual([mine.viewer]);
    // An owner's credential without settings:write (a narrowly scoped key) sees only its creator's keys too.
    const narrow = actor(t.as.owner.userId, "owner", ["databases:read", "members:read"]);
    expect(ids((await h.client.listApiKeys({ organizationId: t.org, actor: narrow })).apiKeys)).toEqual([mine.owner]);
  });

  it("lets a member revoke their own keys, owner and admin anyone's, and nobody another member's otherwise", async () => {
    const t = await team();
    const key = async (role: keyof typeof t.as) =>
      (await h.client.createApiKey({ organizationId: t.org, actor: t.as[role], name: role })).apiKey!.id;

    await h.client.revokeApiKey({ organizationId: t.org, id: await key("developer"), actor: t.as.developer });
    await h.client.revokeApiKey({ organizationId: t.org, id: await key("viewer"), actor: t.as.viewer });

    const viewers = await key("viewer");
    const denied = await expectError(
      h.client.revokeApiKey({ organizationId: t.org, id: viewers, actor: t.as.developer }),
      Code.PermissionDenied,
    );
    expect(denied.rawMessage).toBe("only its creator, an owner or an admin (settings:write) can revoke another member's API key");
    await expectError(h.client.revokeApiKey({ organizationId: t.org, id: await key("owner"), actor: t.as.viewer }), Code.PermissionDenied);
    // Still there: the refusal revoked nothing.
    expect(ids((await h.client.listApiKeys({ organizationId: t.org, actor: t.as.viewer })).apiKeys)).toEqual([viewers]);

    await h.client.revokeApiKey({ organizationId: t.org, id: viewers, actor: t.as.admin });
    await h.client.revokeApiKey({ organizationId: t.org, id: await key("admin"), actor: t.as.owner });
    await h.client.revokeApiKey({ organizationId: t.org, id: await key("owner"), actor: t.as.admin });
    const left = (await h.client.listApiKeys({ organizationId: t.org, actor: t.as.owner })).apiKeys;
    // The owner key the viewer failed to revoke is the only one left.
    expect(left.map((k) => k.name)).toEqual(["owner"]);
  });

  it("never lets a credential mint a key broader than itself: requested scopes beyond its permissions are PERMISSION_DENIED", async () => {
    const t = await team();
    const narrow = actor(t.as.owner.userId, "owner", ["databases:read", "members:read"]);
    const err = await expectError(
      h.client.createApiKey({
        organizationId: t.org,
        actor: narrow,
        name: "wider",
        scopes: ["databases:read", "databases:write", "billing:write"],
      }),
      Code.PermissionDenied,
    );
    expect(err.rawMessage).toBe("a key cannot have scopes its creator's credential lacks: databases:write, billing:write");
    // A viewer's session asking for what its role lacks is refused the same way.
    await expectError(
      h.client.createApiKey({ organizationId: t.org, actor: t.as.viewer, name: "w", scopes: ["databases:write"] }),
      Code.PermissionDenied,
    );

    // No scopes: what the credential holds, not everything the owner's role allows.
    const { apiKey, secret } = await h.client.createApiKey({ organizationId: t.org, actor: narrow, name: "same" });
    expect(apiKey!.scopes).toEqual(["databases:read", "members:read"]);
    expect((await h.client.authenticate({ bearer: secret })).principal!.permissions).toEqual(["databases:read", "members:read"]);
    expect(await h.ctx.pool.query("SELECT count(*)::int AS n FROM api_keys WHERE organization_id = $1", [t.org])).toMatchObject({
      rows: [{ n: 1 }],
    });
  });

  it("requires the actor with its permissions on every key call, and a legacy user_id to name the same user", async () => {
    const t = await team();
    const { apiKey } = await h.client.createApiKey({ organizationId: t.org, actor: t.as.developer, name: "k" });
    const calls = [
      (a: ReturnType<typeof actor> | undefined) => h.client.createApiKey({ organizationId: t.org, actor: a, name: "k" }),
      (a: ReturnType<typeof actor> | undefined) => h.client.listApiKeys({ organizationId: t.org, actor: a }),
      (a: ReturnType<typeof actor> | undefined) => h.client.revokeApiKey({ organizationId: t.org, id: apiKey!.id, actor: a }),
    ];
    for (const call of calls) {
      expect(violations(await expectError(call(undefined), Code.InvalidArgument))).toEqual([
        { field: "actor", message: "user_id and role are required" },
      ]);
      expect(violations(await expectError(call(actor(t.as.developer.userId, "developer", [])), Code.InvalidArgument))).toEqual([
        { field: "actor", message: "permissions are required (the calling credential's effective permissions)" },
      ]);
    }
    const mismatch = await expectError(
      h.client.createApiKey({ organizationId: t.org, userId: t.as.owner.userId, actor: t.as.developer, name: "k" }),
      Code.InvalidArgument,
    );
    expect(violations(mismatch)).toEqual([{ field: "user_id", message: "must equal actor.user_id when set" }]);
    const same = await h.client.createApiKey({ organizationId: t.org, userId: t.as.developer.userId, actor: t.as.developer, name: "k" });
    expect(same.apiKey!.createdBy).toBe(t.as.developer.userId);
  });
});
