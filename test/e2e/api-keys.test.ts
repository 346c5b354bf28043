/**
 * Keys for every member (docs/product.md, Identity), end to end against the real
 * stack: a developer and a viewer create keys capped by their role, list and
 * revoke only their own, while an admin lists and revokes everyone's; and no
 * credential mints a key broader than itself. Members join through the mailed
 * invitation, as real ones do.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { SPEC_2_7 } from "../support/spec-roles.ts";
import { invitationToken, startSmtpServer, type SmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";

let smtp: SmtpServer;
let stack: Stack;

beforeAll(async () => {
  smtp = await startSmtpServer();
  stack = await startStack({ agents: "fsn1", env: { SMTP_URL: smtp.url } });
}, 240_000);

afterAll(async () => {
  await stack?.destroy();
  await smtp?.stop();
});

const PATH = "/v1/organization/api-keys";
const PASSWORD = "correct horse battery staple";
type Api = ReturnType<typeof createApi>;
type Role = "admin" | "developer" | "viewer";

interface Key {
  id: string;
  name: string;
  scopes: string[];
  role: string;
  created_by: string;
  secret?: string;
}

describe("API keys for every member, end to end", () => {
  const as = {} as Record<"owner" | Role, Api>;
  const userId = {} as Record<"owner" | Role, string>;
  const keys = {} as Record<"owner" | Role, Key>;

  /** A client acting with an API key's secret. */
  const withKey = (secret: string) => {
    const c = createApi(stack.baseUrl);
    c.setToken(secret);
    return c;
  };
  const ids = async (client: Api) => {
    const res = await client.get(`${PATH}?per_page=100`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body.data.api_keys as Key[]).map((k) => k.id).sort();
  };

  // Three invitation mails waited for (30 s each): the test's own timeout covers them, so one that sticks names itself.
  it("sets up an organization with an admin, a developer and a viewer", { timeout: 3 * 30_000 + 15_000 }, async () => {
    as.owner = createApi(stack.baseUrl);
    userId.owner = (await as.owner.signup("keys-owner")).user.id;
    for (const role of ["admin", "developer", "viewer"] as const) {
      const email = `keys-${role}-${Date.now()}@example.com`;
      expect((await as.owner.post("/v1/organization/members", { email, role })).status).toBe(201);
      const token = invitationToken(await smtp.waitForMail((m) => m.to.includes(email), 30_000));
      as[role] = createApi(stack.baseUrl);
      const accepted = await as[role].post("/v1/invitations/accept", { token, name: role, password: PASSWORD });
      expect(accepted.status).toBe(201);
      as[role].setToken(accepted.body.data.access_token);
      userId[role] = accepted.body.data.member.user.id;
    }
  });

  it("every member creates a key; without scopes it gets what the creator's role allows", async () => {
    const want = SPEC_2_7;
    for (const who of ["owner", "admin", "developer", "viewer"] as const) {
      const res = await as[who].post(PATH, { name: `${who}'s key` });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.data).toMatchObject({ name: `${who}'s key`, role: who, created_by: userId[who], scopes: want[who] });
      expect(res.body.data.secret).toMatch(/^dbk_/);
      keys[who] = res.body.data;
    }
    // The keys work, with their creator's powers and no more.
    expect((await withKey(keys.viewer.secret!).get("/v1/databases")).status).toBe(200);
    const viewerWrite = await withKey(keys.viewer.secret!).post("/v1/databases", { name: "nope", region: "fsn1", tier: "micro" });
    expect(viewerWrite.status).toBe(403);
  });

  it("a developer and a viewer list only their own keys; owner and admin list everyone's", async () => {
    const all = Object.values(keys)
      .map((k) => k.id)
      .sort();
    expect(await ids(as.owner)).toEqual(all);
    expect(await ids(as.admin)).toEqual(all);
    expect(await ids(as.developer)).toEqual([keys.developer.id]);
    expect(await ids(as.viewer)).toEqual([keys.viewer.id]);
    // A key lists as its creator does.
    expect(await ids(withKey(keys.developer.secret!))).toEqual([keys.developer.id]);
  });

  it("no credential mints a key broader than itself: 403 naming the scopes it lacks", async () => {
    const viewerWide = await as.viewer.post(PATH, { name: "wider", scopes: ["databases:read", "databases:write"] });
    expect(viewerWide.status).toBe(403);
    expect(viewerWide.body.error).toMatchObject({
      code: "insufficient_permissions",
      message: "a key cannot have scopes its creator's credential lacks: databases:write",
    });

    const narrow = await as.owner.post(PATH, { name: "narrow", scopes: ["databases:read", "members:read"] });
    expect(narrow.status).toBe(201);
    const byNarrow = withKey(narrow.body.data.secret);
    const wider = await byNarrow.post(PATH, { name: "wider", scopes: ["billing:write"] });
    expect(wider.status).toBe(403);
    expect(wider.body.error.message).toBe("a key cannot have scopes its creator's credential lacks: billing:write");
    const same = await byNarrow.post(PATH, { name: "same" });
    expect(same.status).toBe(201);
    expect(same.body.data.scopes).toEqual(["databases:read", "members:read"]);
    // Without settings:write the owner's narrow key sees only its creator's keys, not the admin's.
    expect(await ids(byNarrow)).not.toContain(keys.admin.id);
    for (const id of [narrow.body.data.id, same.body.data.id]) expect((await as.owner.delete(`${PATH}/${id}`)).status).toBe(204);
  });

  it("a developer and a viewer revoke their own keys but not another member's (403)", async () => {
    const denied = await as.developer.delete(`${PATH}/${keys.viewer.id}`);
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe("insufficient_permissions");
    expect((await as.viewer.delete(`${PATH}/${keys.admin.id}`)).status).toBe(403);
    expect((await withKey(keys.viewer.secret!).get("/v1/databases")).status).toBe(200);

    expect((await as.developer.delete(`${PATH}/${keys.developer.id}`)).status).toBe(204);
    expect((await withKey(keys.developer.secret!).get("/v1/databases")).status).toBe(401);
    expect(await ids(as.developer)).toEqual([]);

    const again = await as.viewer.post(PATH, { name: "viewer's second" });
    expect(again.status).toBe(201);
    expect((await as.viewer.delete(`${PATH}/${again.body.data.id}`)).status).toBe(204);
    expect(await ids(as.viewer)).toEqual([keys.viewer.id]);
  });

  it("an admin revokes anyone's key, and another organization's is 404", async () => {
    const stranger = createApi(stack.baseUrl);
    await stranger.signup("keys-stranger");
    expect((await stranger.delete(`${PATH}/${keys.viewer.id}`)).status).toBe(404);

    expect((await as.admin.delete(`${PATH}/${keys.viewer.id}`)).status).toBe(204);
    expect((await withKey(keys.viewer.secret!).get("/v1/databases")).status).toBe(401);
    expect((await as.admin.delete(`${PATH}/${keys.owner.id}`)).status).toBe(204);
    expect(await ids(as.admin)).toEqual([keys.admin.id]);
  });
});
