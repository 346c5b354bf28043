/**
 * Payment methods end to end, against the real stack (billing with the local
 * test processor): the first card becomes the default, another one can take
 * its place, the processor's refusal is a 422 naming the field, and neither
 * another organization nor a member without billing:write can touch them.
 * Removal: any method but the default at once; the default only as the last
 * one and once no database beyond the free allowance runs (a real database,
 * stopped for real, is what lets the last card go).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, waitFor, waitStatus } from "../support/api.ts";
import { invitationToken, startSmtpServer, type SmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";

let smtp: SmtpServer;
let stack: Stack;

beforeAll(async () => {
  // The admin joins through the mailed invitation link, as a real one would.
  smtp = await startSmtpServer();
  stack = await startStack({ agents: "fsn1", env: { SMTP_URL: smtp.url } });
}, 240_000);

afterAll(async () => {
  await stack?.destroy();
  await smtp?.stop();
});

const PATH = "/v1/billing/payment-methods";
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface PaymentMethod {
  id: string;
  brand: string;
  default: boolean;
}

describe("payment methods, end to end", () => {
  let api: ReturnType<typeof createApi>;
  let admin: ReturnType<typeof createApi>;
  let visa: PaymentMethod;
  let mastercard: PaymentMethod;

  const listed = async (client = api) => {
    const res = await client.get(PATH);
    expect(res.status).toBe(200);
    return res.body.data.payment_methods as PaymentMethod[];
  };

  it("an organization starts without payment methods", async () => {
    api = createApi(stack.baseUrl);
    await api.signup("pm-owner");
    const res = await api.get(PATH);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ payment_methods: [] });
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 0, total_pages: 0 });
  });

  it("the first card (tok_visa) answers 201 with its record and becomes the default", async () => {
    const res = await api.post(PATH, { type: "card", token: "tok_visa" });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^pm-/),
      type: "card",
      brand: "visa",
      last4: "4242",
      exp_month: expect.any(Number),
      exp_year: expect.any(Number),
      default: true,
      created_at: expect.stringMatching(ISO),
    });
    // A card the processor accepted has not expired.
    const { exp_month, exp_year } = res.body.data;
    expect(new Date(Date.UTC(exp_year, exp_month)).getTime()).toBeGreaterThan(Date.now());
    expect(JSON.stringify(res.body)).not.toContain("tok_visa");
    visa = res.body.data;
  });

  it("a second card (tok_mastercard) is not the default", async () => {
    const res = await api.post(PATH, { type: "card", token: "tok_mastercard" });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ type: "card", brand: "mastercard", last4: "4444", default: false });
    mastercard = res.body.data;
  });

  it("lists both, oldest first, with list meta", async () => {
    const res = await api.get(PATH);
    expect(res.body.data.payment_methods).toEqual([visa, mastercard]);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 2, total_pages: 1 });
  });

  it("PATCH default on the second makes it the default; the first no longer is", async () => {
    const res = await api.patch(`${PATH}/${mastercard.id}`, { default: true });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ ...mastercard, default: true });
    expect((await listed()).map((pm) => [pm.id, pm.default])).toEqual([
      [visa.id, false],
      [mastercard.id, true],
    ]);
  });

  it("the default cannot be cleared, only replaced: 422 naming `default`", async () => {
    const res = await api.patch(`${PATH}/${mastercard.id}`, { default: false });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("validation_error");
    expect(res.body.error.details).toEqual([{ field: "default", message: expect.any(String) }]);
    expect((await listed()).find((pm) => pm.default)?.id).toBe(mastercard.id);
  });

  it("a token the processor does not accept, or another type, is 422 with details; nothing is added", async () => {
    const badToken = await api.post(PATH, { type: "card", token: "tok_not_a_card" });
    expect(badToken.status).toBe(422);
    expect(badToken.body.error.code).toBe("validation_error");
    expect(badToken.body.error.details).toEqual([{ field: "token", message: expect.any(String) }]);
    const badType = await api.post(PATH, { type: "sepa_debit", token: "tok_visa" });
    expect(badType.status).toBe(422);
    expect(badType.body.error.details).toEqual([{ field: "type", message: expect.any(String) }]);
    const missing = await api.post(PATH, { type: "card" });
    expect(missing.status).toBe(422);
    expect(missing.body.error.details).toEqual([{ field: "token", message: "is required" }]);
    expect(await listed()).toHaveLength(2);
  });

  it("a POST retried with its Idempotency-Key adds the card once", async () => {
    const headers = { "idempotency-key": `pm-${Date.now()}` };
    const first = await api.post(PATH, { type: "card", token: "tok_amex" }, headers);
    const retry = await api.post(PATH, { type: "card", token: "tok_amex" }, headers);
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body.data).toEqual(first.body.data);
    expect((await listed()).map((pm) => pm.brand)).toEqual(["visa", "mastercard", "amex"]);
  });

  it("another organization neither sees nor changes them (404)", async () => {
    const other = createApi(stack.baseUrl);
    await other.signup("pm-stranger");
    expect(await listed(other)).toEqual([]);
    for (const id of [visa.id, mastercard.id]) {
      const res = await other.patch(`${PATH}/${id}`, { default: true });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("resource_not_found");
    }
    expect((await listed()).find((pm) => pm.default)?.id).toBe(mastercard.id);
  });

  it("an admin (billing:read, not billing:write) sees them but gets 403 adding or changing one", async () => {
    const email = `pm-admin-${Date.now()}@example.com`;
    expect((await api.post("/v1/organization/members", { email, role: "admin" })).status).toBe(201);
    const token = invitationToken(await smtp.waitForMail((m) => m.to.includes(email), 30_000));
    admin = createApi(stack.baseUrl);
    const accepted = await admin.post("/v1/invitations/accept", { token, name: "Admin", password: "correct horse battery staple" });
    expect(accepted.status).toBe(201);
    admin.setToken(accepted.body.data.access_token);

    expect((await listed(admin)).map((pm) => pm.id)).toEqual((await listed()).map((pm) => pm.id));
    for (const res of [
      await admin.post(PATH, { type: "card", token: "tok_visa" }),
      await admin.patch(`${PATH}/${visa.id}`, { default: true }),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({
        code: "insufficient_permissions",
        message: "this action requires the billing:write permission",
      });
    }
    expect((await listed()).map((pm) => [pm.id, pm.default]).slice(0, 2)).toEqual([
      [visa.id, false],
      [mastercard.id, true],
    ]);
  });

  it("removing: 403 without billing:write, 404 for another organization's method", async () => {
    const denied = await admin.delete(`${PATH}/${visa.id}`);
    expect(denied.status).toBe(403);
    expect(denied.body.error).toMatchObject({
      code: "insufficient_permissions",
      message: "this action requires the billing:write permission",
    });
    const other = createApi(stack.baseUrl);
    await other.signup("pm-remover");
    expect((await other.delete(`${PATH}/${visa.id}`)).status).toBe(404);
    expect((await listed()).map((pm) => pm.id)).toContain(visa.id);
  });

  it("a method that is not the default is removed at once (204); again is 404", async () => {
    const res = await api.delete(`${PATH}/${visa.id}`);
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expect((await listed()).map((pm) => pm.brand)).toEqual(["mastercard", "amex"]);
    expect((await api.delete(`${PATH}/${visa.id}`)).status).toBe(404);
  });

  it("the default is refused while another method exists (409: make another one the default first)", async () => {
    const res = await api.delete(`${PATH}/${mastercard.id}`);
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("resource_conflict");
    expect(res.body.error.message).toContain("make another payment method the default first");
    const amex = (await listed()).find((pm) => pm.brand === "amex")!;
    expect((await api.delete(`${PATH}/${amex.id}`)).status).toBe(204);
    expect((await listed()).map((pm) => [pm.id, pm.default])).toEqual([[mastercard.id, true]]);
  });

  // Its own timeout covers its waits (running, metered, removed), so one that sticks fails naming itself.
  it("the last one is refused while a database beyond the free allowance runs, and goes once it is stopped", {
    timeout: 60_000 + 30_000 + 60_000 + 15_000,
  }, async () => {
    const created = await api.post("/v1/databases", { name: "needs-a-card", region: "fsn1", tier: "small" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const db = created.body.data.id as string;
    await waitStatus(api, db, "running", 60_000, () => stack.output());
    // Billing hears of it through the databases outbox; its meter then runs.
    await waitFor(async () => (await api.get("/v1/billing/usage")).body.data.usage.compute.hours > 0, 30_000, "billing metering it");

    const refused = await api.delete(`${PATH}/${mastercard.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("resource_conflict");
    expect(refused.body.error.message).toContain(`${db} (small)`);
    expect(refused.body.error.message).toContain("stop the databases that need a card");
    expect((await listed()).map((pm) => pm.id)).toEqual([mastercard.id]);

    expect((await api.post(`/v1/databases/${db}/stop`)).status).toBe(200);
    // Refused until billing has heard the database stop; a refusal changes nothing.
    await waitFor(async () => (await api.delete(`${PATH}/${mastercard.id}`)).status === 204, 60_000, "the last card removed");
    expect(await listed()).toEqual([]);

    // Without a card the organization is back to the free allowance. Billing may hear the stop before the
    // server has stopped (a start from `stopping` is 409 naming the status): start it once it is stopped.
    await waitStatus(api, db, "stopped", 60_000, () => stack.output());
    const start = await api.post(`/v1/databases/${db}/start`);
    expect(start.status).toBe(402);
    expect(start.body.error.code).toBe("payment_required");
    expect((await api.delete(`/v1/databases/${db}`)).status).toBe(204);
  });
});
