/**
 * The payment-methods routes against the stub billing service: the public
 * record, the list, making another method the default, billing's field
 * violations as 422 details, another
 * organization's id as 404, and the permissions.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;

const OWNER = "tok-pm-owner";
const OTHER = "tok-pm-other-org";
const READER = "tok-pm-reader";
const NOBODY = "tok-pm-nothing";
const PATH = "/v1/billing/payment-methods";

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(OWNER, principal({ org: "org-pm", permissions: ALL_PERMISSIONS }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-pm-other", permissions: ALL_PERMISSIONS }));
  // What an admin has: billing:read without billing:write.
  stubs.state.tokens.set(READER, principal({ org: "org-pm", permissions: ALL_PERMISSIONS.filter((p) => p !== "billing:write") }));
  stubs.state.tokens.set(NOBODY, principal({ org: "org-pm", permissions: ["databases:read"] }));
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

const add = (token: string, body: unknown, headers: Record<string, string> = {}) =>
  api(gw.url, PATH, { method: "POST", token, body, headers });
const setDefault = (token: string, id: string, body: unknown) => api(gw.url, `${PATH}/${id}`, { method: "PATCH", token, body });

describe("payment methods", () => {
  let visa: string;
  let mastercard: string;

  it("POST answers 201 with the record; the first method becomes the default", async () => {
    // Fields it does not take are refused (issue 10), so the organization cannot come from the body.
    const foreign = await add(OWNER, { type: "card", token: "tok_visa", organization_id: "org-pm-other", default: false });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.details.map((d: { field: string }) => d.field)).toEqual(["organization_id", "default"]);
    const res = await add(OWNER, { type: "card", token: "tok_visa" });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^pm-/),
      type: "card",
      brand: "visa",
      last4: "4242",
      exp_month: 12,
      exp_year: 2034,
      default: true,
      created_at: "2025-03-01T10:00:00.000Z",
    });
    visa = res.body.data.id;
    expect(stubs.state.seen.get("addPaymentMethod")!.at(-1)).toMatchObject({ organizationId: "org-pm", type: "card", token: "tok_visa" });
  });

  it("a second method is not the default", async () => {
    const res = await add(OWNER, { type: "card", token: "tok_mastercard" });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ brand: "mastercard", last4: "4444", default: false });
    mastercard = res.body.data.id;
  });

  it("GET lists them oldest first, paginated like every list", async () => {
    const res = await api(gw.url, PATH, { token: OWNER });
    expect(res.status).toBe(200);
    expect(res.body.data.payment_methods.map((pm: { id: string; default: boolean }) => [pm.id, pm.default])).toEqual([
      [visa, true],
      [mastercard, false],
    ]);
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 2, total_pages: 1 });

    const second = await api(gw.url, `${PATH}?per_page=1&page=2`, { token: OWNER });
    expect(second.body.data.payment_methods.map((pm: { id: string }) => pm.id)).toEqual([mastercard]);
    expect(second.body.meta).toMatchObject({ page: 2, per_page: 1, total: 2, total_pages: 2 });
    expect((await api(gw.url, `${PATH}?per_page=101`, { token: OWNER })).status).toBe(422);
  });

  it("PATCH default makes another method the default; the previous one stops being it", async () => {
    const res = await setDefault(OWNER, mastercard, { default: true });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: mastercard, brand: "mastercard", default: true });
    expect(stubs.state.seen.get("updatePaymentMethod")!.at(-1)).toMatchObject({
      organizationId: "org-pm",
      id: mastercard,
      isDefault: true,
    });
    const listed = (await api(gw.url, PATH, { token: OWNER })).body.data.payment_methods;
    expect(listed.map((pm: { default: boolean }) => pm.default)).toEqual([false, true]);
  });

  it("PATCH without `default` changes nothing", async () => {
    const res = await setDefault(OWNER, visa, {});
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: visa, default: false });
    expect((stubs.state.seen.get("updatePaymentMethod")!.at(-1) as { isDefault?: boolean }).isDefault).toBeUndefined();
  });

  it("billing's refusals are 422 with details naming the public fields", async () => {
    const badToken = await add(OWNER, { type: "card", token: "tok_nonsense" });
    expect(badToken.status).toBe(422);
    expect(badToken.body.error).toMatchObject({
      code: "validation_error",
      details: [{ field: "token", message: "was declined by the payment processor: it is not a valid card token" }],
    });
    const badType = await add(OWNER, { type: "iban", token: "tok_visa" });
    expect(badType.status).toBe(422);
    expect(badType.body.error.details).toEqual([{ field: "type", message: "must be one of: card" }]);
    const undefaulted = await setDefault(OWNER, mastercard, { default: false });
    expect(undefaulted.status).toBe(422);
    expect(undefaulted.body.error.details).toEqual([{ field: "default", message: "make another payment method the default instead" }]);
  });

  it("the gateway's own 422 for missing and mistyped fields, before billing is asked", async () => {
    const before = stubs.state.seen.get("addPaymentMethod")!.length;
    const res = await add(OWNER, { type: 1 });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([
      { field: "type", message: "must be a string" },
      { field: "token", message: "is required" },
    ]);
    expect(stubs.state.seen.get("addPaymentMethod")).toHaveLength(before);
    const patch = await setDefault(OWNER, visa, { default: "yes" });
    expect(patch.status).toBe(422);
    expect(patch.body.error.details).toEqual([{ field: "default", message: "must be a boolean" }]);
  });

  it("another organization neither sees nor changes them", async () => {
    const listed = await api(gw.url, PATH, { token: OTHER });
    expect(listed.status).toBe(200);
    expect(listed.body.data.payment_methods).toEqual([]);
    const res = await setDefault(OTHER, visa, { default: true });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("resource_not_found");
    expect((await setDefault(OWNER, "pm-unknown", { default: true })).status).toBe(404);
  });

  it("billing:read lists; adding and changing need billing:write", async () => {
    expect((await api(gw.url, PATH, { token: READER })).status).toBe(200);
    for (const res of [await add(READER, { type: "card", token: "tok_amex" }), await setDefault(READER, visa, { default: true })]) {
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({
        code: "insufficient_permissions",
        message: "this action requires the billing:write permission",
      });
    }
    const noRead = await api(gw.url, PATH, { token: NOBODY });
    expect(noRead.status).toBe(403);
    expect(noRead.body.error.message).toContain("billing:read");
    expect((await api(gw.url, PATH, { token: OWNER })).body.data.payment_methods).toHaveLength(2);
  });

  it("a POST retried with the same Idempotency-Key adds the card once and replays the 201", async () => {
    const before = stubs.state.seen.get("addPaymentMethod")!.length;
    const first = await add(OWNER, { type: "card", token: "tok_amex" }, { "idempotency-key": "pm-retry-1" });
    const again = await add(OWNER, { type: "card", token: "tok_amex" }, { "idempotency-key": "pm-retry-1" });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data).toEqual(first.body.data);
    expect(stubs.state.seen.get("addPaymentMethod")).toHaveLength(before + 1);
    const otherRequest = await add(OWNER, { type: "card", token: "tok_visa" }, { "idempotency-key": "pm-retry-1" });
    expect(otherRequest.status).toBe(422);
  });
});
