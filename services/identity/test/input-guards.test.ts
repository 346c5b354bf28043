import { Code } from "@connectrpc/connect";
import { createInternalClient, startServer, type RunningServer } from "@dbaas/kit";
import { IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../src/routes.ts";
import { TEST_SECRET, actor, createHarness, expectError, signupInput, signupUser, violations, type Harness } from "./harness.ts";

// Internal callers do not pass through the gateway's checks: identity holds
// every string it stores or queries with to the same bounds. These answered
// 500 before (PostgreSQL refusing NUL, an index row too large).

let h: Harness;
let server: RunningServer;
/** Identity as deployed: a real HTTP/2 server, reached through the internal client. */
let wire: ReturnType<typeof createInternalClient<typeof IdentityService>>;

beforeAll(async () => {
  h = await createHarness();
  server = await startServer({ port: 0, routes: routes(h.ctx), internalSecret: TEST_SECRET, log: h.ctx.log });
  wire = createInternalClient(IdentityService, server.url, { secret: TEST_SECRET, caller: "gateway" });
});

afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function loginFailureRows(): Promise<number> {
  const { rows } = await h.ctx.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM login_failures");
  return rows[0]!.n;
}

describe("logging in", () => {
  it("refuses a 250 KB e-mail as invalid, before any lookup or login-failure row", async () => {
    const before = await loginFailureRows();
    const err = await expectError(
      h.client.createToken({ email: `${"a".repeat(250_000)}@example.com`, password: "whatever it is" }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([{ field: "email", message: "must be at most 254 characters" }]);
    expect(await loginFailureRows()).toBe(before);
  });

  it("refuses a password longer than any account's without hashing it", async () => {
    const err = await expectError(
      h.client.createToken({ email: "someone@example.com", password: "p".repeat(100_000) }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([{ field: "password", message: "must be at most 256 characters" }]);
  });

  it("answers a NUL in the e-mail with INVALID_ARGUMENT naming it, over the wire", async () => {
    const err = await expectError(wire.createToken({ email: "a\u0000b@example.com", password: "whatever it is" }), Code.InvalidArgument);
    expect(violations(err)).toEqual([{ field: "email", message: "must not contain NUL (U+0000) characters" }]);
  });
});

describe("names", () => {
  it.each([
    ["a right-to-left override", "Acme\u202E"],
    ["a zero-width space", "Ac\u200Bme"],
    ["a bidi isolate", "\u2066Acme\u2069"],
    ["a line feed inside", "Ac\nme"],
    ["a line separator", "Ac\u2028me"],
    ["a lone surrogate", "Ac\uD800me"],
  ])("are refused with %s, for users, organizations and API keys", async (_what, name) => {
    const signup = await expectError(h.client.signup(signupInput({ name, organizationName: name })), Code.InvalidArgument);
    expect(violations(signup).map((v) => v.field)).toEqual(["name", "organization_name"]);
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const rename = await expectError(
      h.client.updateOrganization({ organizationId: org, actor: actor(owner.user!.id, "owner"), name }),
      Code.InvalidArgument,
    );
    expect(violations(rename)).toEqual([{ field: "name", message: "must not contain control characters" }]);
    const key = await expectError(
      h.client.createApiKey({ organizationId: org, actor: actor(owner.user!.id, "owner"), name }),
      Code.InvalidArgument,
    );
    expect(violations(key)).toEqual([{ field: "name", message: "must not contain control characters" }]);
  });

  it("count characters, not UTF-16 units: 100 elephants are a name, 101 are not", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const ok = await h.client.updateOrganization({
      organizationId: org,
      actor: actor(owner.user!.id, "owner"),
      name: "\u{1F418}".repeat(100),
    });
    expect(ok.organization!.name).toBe("\u{1F418}".repeat(100));
    const err = await expectError(
      h.client.updateOrganization({ organizationId: org, actor: actor(owner.user!.id, "owner"), name: "\u{1F418}".repeat(101) }),
      Code.InvalidArgument,
    );
    expect(violations(err)).toEqual([{ field: "name", message: "must be at most 100 characters" }]);
  });
});

describe("ids holding NUL, over the wire", () => {
  it("a transfer to new_owner_id \\u0000 is INVALID_ARGUMENT naming the field; ownership is unchanged", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const err = await expectError(
      wire.transferOwnership({
        organizationId: org,
        actor: actor(owner.user!.id, "owner"),
        newOwnerId: "\u0000",
        password: "whatever it is",
      }),
      Code.InvalidArgument,
    );
    expect(violations(err).map((v) => v.field)).toEqual(["new_owner_id"]);
    const { rows } = await h.ctx.pool.query("SELECT user_id FROM memberships WHERE organization_id = $1 AND role = 'owner'", [org]);
    expect(rows.map((r) => r.user_id)).toEqual([owner.user!.id]);
  });

  it("an API key, invitation or member id that cannot exist is NOT_FOUND", async () => {
    const owner = await signupUser(h);
    const org = owner.organization!.id;
    const as = actor(owner.user!.id, "owner");
    await expectError(wire.revokeApiKey({ organizationId: org, actor: as, id: "key-\u0000" }), Code.NotFound);
    await expectError(wire.cancelInvitation({ organizationId: org, id: "inv\u0000" }), Code.NotFound);
    await expectError(wire.removeMember({ organizationId: org, actor: as, memberId: "\u0000" }), Code.NotFound);
    await expectError(wire.getOrganization({ organizationId: "org-\u0000" }), Code.NotFound);
  });
});
