/**
 * Listing and removing spending alerts, and removing payment methods, against
 * the stub billing service: the list with its page meta, 204 on removal, the
 * caller's organization only (another's id is 404), billing's refusal as 409
 * with its message, an id that cannot exist answered 404 before billing is
 * asked, and the permissions (billing:read lists, billing:write removes).
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { AlertSchema } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;

const OWNER = "tok-rm-owner";
const OTHER = "tok-rm-other";
// What an admin has: billing:read without billing:write.
const READER = "tok-rm-reader";
const NOBODY = "tok-rm-nothing";

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(OWNER, principal({ org: "org-rm", permissions: ALL_PERMISSIONS }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-rm-other", permissions: ALL_PERMISSIONS }));
  stubs.state.tokens.set(READER, principal({ org: "org-rm", permissions: ALL_PERMISSIONS.filter((p) => p !== "billing:write") }));
  stubs.state.tokens.set(NOBODY, principal({ org: "org-rm", permissions: ["databases:read"] }));
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

const seen = (rpc: string) => stubs.state.seen.get(rpc) ?? [];
let seeded = 0;

function seedAlerts(org: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => {
    const alert = create(AlertSchema, {
      id: `alr-${org.replaceAll("-", "")}${++seeded}`,
      organizationId: org,
      threshold: 10 + i,
      currency: "USD",
      channels: ["email"],
      createdAt: timestampFromDate(new Date(Date.UTC(2025, 2, 1, 10, 0, i))),
    });
    stubs.state.alerts.push(alert);
    return alert.id;
  });
}

describe("GET /v1/billing/alerts", () => {
  it("lists the caller's organization's alerts in billing's order, with page meta", async () => {
    const mine = seedAlerts("org-rm", 3);
    seedAlerts("org-rm-other", 2);
    const res = await api(gw.url, "/v1/billing/alerts", { token: READER });
    expect(res.status).toBe(200);
    expect(res.body.data.alerts).toEqual(
      mine.map((id, i) => ({ id, threshold: 10 + i, currency: "USD", channels: ["email"], created_at: `2025-03-01T10:00:0${i}.000Z` })),
    );
    expect(res.body.meta).toMatchObject({ page: 1, per_page: 20, total: 3, total_pages: 1 });
    expect(seen("listAlerts").at(-1)).toMatchObject({ organizationId: "org-rm" });

    const page = await api(gw.url, "/v1/billing/alerts?per_page=2&page=2", { token: OWNER });
    expect(page.body.data.alerts.map((a: { id: string }) => a.id)).toEqual([mine[2]]);
    expect(page.body.meta).toMatchObject({ page: 2, per_page: 2, total: 3, total_pages: 2 });
    expect((await api(gw.url, "/v1/billing/alerts?per_page=0", { token: OWNER })).status).toBe(422);
  });

  it("needs billing:read", async () => {
    const res = await api(gw.url, "/v1/billing/alerts", { token: NOBODY });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toBe("this action requires the billing:read permission");
  });
});

describe("DELETE /v1/billing/alerts/{id}", () => {
  it("204 with no body; again, or another organization's, 404", async () => {
    const [id] = seedAlerts("org-rm", 1);
    const other = await api(gw.url, `/v1/billing/alerts/${id}`, { method: "DELETE", token: OTHER });
    expect(other.status).toBe(404);
    expect(other.body.error).toMatchObject({ code: "resource_not_found", message: "alert not found" });
    const res = await api(gw.url, `/v1/billing/alerts/${id}`, { method: "DELETE", token: OWNER });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect(seen("deleteAlert").at(-1)).toMatchObject({ organizationId: "org-rm", id });
    expect((await api(gw.url, `/v1/billing/alerts/${id}`, { method: "DELETE", token: OWNER })).status).toBe(404);
  });

  it("an id that cannot be an alert's is 404 without asking billing; billing:read is not enough", async () => {
    const before = seen("deleteAlert").length;
    for (const id of ["pm-abc", "alr-%00"]) {
      const res = await api(gw.url, `/v1/billing/alerts/${id}`, { method: "DELETE", token: OWNER });
      expect(res.status, id).toBe(404);
    }
    expect(seen("deleteAlert")).toHaveLength(before);
    const [id] = seedAlerts("org-rm", 1);
    const denied = await api(gw.url, `/v1/billing/alerts/${id}`, { method: "DELETE", token: READER });
    expect(denied.status).toBe(403);
    expect(denied.body.error.message).toBe("this action requires the billing:write permission");
    expect(stubs.state.alerts.some((a) => a.id === id)).toBe(true);
  });
});

describe("DELETE /v1/billing/payment-methods/{id}", () => {
  const add = async (token: string, cardToken: string) =>
    (await api(gw.url, "/v1/billing/payment-methods", { method: "POST", token, body: { type: "card", token: cardToken } })).body.data
      .id as string;

  it("removes a method (204); billing's refusal to let the default go is 409 with its message; another organization's is 404", async () => {
    const visa = await add(OWNER, "tok_visa");
    const mastercard = await add(OWNER, "tok_mastercard");

    const refused = await api(gw.url, `/v1/billing/payment-methods/${visa}`, { method: "DELETE", token: OWNER });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toEqual({
      code: "resource_conflict",
      message: "make another payment method the default first",
      details: [],
    });

    expect((await api(gw.url, `/v1/billing/payment-methods/${mastercard}`, { method: "DELETE", token: OTHER })).status).toBe(404);
    const res = await api(gw.url, `/v1/billing/payment-methods/${mastercard}`, { method: "DELETE", token: OWNER });
    expect(res.status).toBe(204);
    expect(seen("deletePaymentMethod").at(-1)).toMatchObject({ organizationId: "org-rm", id: mastercard });
    const left = await api(gw.url, "/v1/billing/payment-methods", { token: OWNER });
    expect(left.body.data.payment_methods.map((pm: { id: string }) => pm.id)).toEqual([visa]);
  });

  it("needs billing:write; an impossible id is 404 before billing is asked", async () => {
    const visa = await add(OWNER, "tok_amex");
    const denied = await api(gw.url, `/v1/billing/payment-methods/${visa}`, { method: "DELETE", token: READER });
    expect(denied.status).toBe(403);
    expect(denied.body.error.message).toBe("this action requires the billing:write permission");
    const before = seen("deletePaymentMethod").length;
    expect((await api(gw.url, "/v1/billing/payment-methods/alr-1", { method: "DELETE", token: OWNER })).status).toBe(404);
    expect(seen("deletePaymentMethod")).toHaveLength(before);
  });
});

describe("the OpenAPI document", () => {
  it("documents the new routes: the alert list, and 204 on removal (409 too for a payment method)", async () => {
    const doc = (await api(gw.url, "/v1/openapi.json")).body;
    const list = doc.paths["/v1/billing/alerts"].get;
    expect(Object.keys(list.responses)).toContain("200");
    expect(doc.paths["/v1/billing/alerts/{id}"].delete.responses).toHaveProperty("204");
    expect(doc.paths["/v1/billing/alerts/{id}"].delete.responses).toHaveProperty("404");
    const removePm = doc.paths["/v1/billing/payment-methods/{id}"].delete.responses;
    expect(removePm).toHaveProperty("204");
    expect(removePm).toHaveProperty("409");
  });
});
