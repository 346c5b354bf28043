/**
 * Payment methods end to end, against the real stack (billing with the local
 * test processor): the first card becomes the default, another one can take
 * its place, the processor's refusal is a 422 naming the field, and neither
 * another organization nor a member without billing:write can touch them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
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
    const admin = createApi(stack.baseUrl);
    const accepted = await admin.post("/v1/invitations/accept", { token, name: "Admin", password: "correct horse battery staple" });
    expect(accepted.status).toBe(201);
    admin.setToken(accepted.body.data.access_token);

    expect((await listed(admin)).map((pm) => pm.id)).toEqual((await listed()).map((pm) => pm.id));
    for (const res of [await admin.post(PATH, { type: "card", token: "tok_visa" }), await admin.patch(`${PATH}/${visa.id}`, { default: true })]) {
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: "insufficient_permissions", message: "this action requires the billing:write permission" });
    }
    expect((await listed()).map((pm) => [pm.id, pm.default]).slice(0, 2)).toEqual([
      [visa.id, false],
      [mastercard.id, true],
    ]);
  });
});
