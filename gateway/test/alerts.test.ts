/**
 * POST /v1/billing/alerts against the stub billing service: the public
 * record, the organization taken from the credential, billing's field
 * violations as 422 details, the per-organization cap as 409, the permission
 * it needs, and a retry with the same Idempotency-Key.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { AlertSchema } from "@dbaas/proto/billing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;

const OWNER = "tok-alr-owner";
const CAPPED = "tok-alr-capped";
const READER = "tok-alr-reader";
const PATH = "/v1/billing/alerts";

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(OWNER, principal({ org: "org-alr", permissions: ALL_PERMISSIONS }));
  stubs.state.tokens.set(CAPPED, principal({ org: "org-alr-capped", permissions: ALL_PERMISSIONS }));
  // What an admin has: billing:read without billing:write.
  stubs.state.tokens.set(READER, principal({ org: "org-alr", permissions: ALL_PERMISSIONS.filter((p) => p !== "billing:write") }));
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

const createAlert = (token: string, body: unknown, headers: Record<string, string> = {}) =>
  api(gw.url, PATH, { method: "POST", token, body, headers });
const calls = () => stubs.state.seen.get("createAlert") ?? [];

describe("billing alerts", () => {
  it("POST answers 201 with the record, for the caller's organization; a body naming another is refused", async () => {
    // Fields it does not take are refused (issue 10), so the organization cannot come from the body.
    const foreign = await createAlert(OWNER, { threshold: 10, currency: "USD", channels: ["email"], organization_id: "org-elsewhere" });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.details).toEqual([
      { field: "organization_id", message: "is not a field of this request (it takes: threshold, currency, channels)" },
    ]);
    const res = await createAlert(OWNER, { threshold: 10, currency: "USD", channels: ["email"] });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^alr-/),
      threshold: 10,
      currency: "USD",
      channels: ["email"],
      created_at: "2025-03-01T10:00:00.000Z",
    });
    expect(calls().at(-1)).toMatchObject({ organizationId: "org-alr", threshold: 10, currency: "USD", channels: ["email"] });
  });

  it("a fractional threshold arrives as it was sent", async () => {
    const res = await createAlert(OWNER, { threshold: 99.95, currency: "USD", channels: ["email"] });
    expect(res.status).toBe(201);
    expect(res.body.data.threshold).toBe(99.95);
  });

  it("billing's refusals are 422 with details naming the public fields", async () => {
    const res = await createAlert(OWNER, { threshold: 0, currency: "usd", channels: [] });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({
      code: "validation_error",
      details: [
        { field: "threshold", message: "must be greater than 0" },
        { field: "currency", message: "must be one of: USD" },
        { field: "channels", message: "must list at least one channel" },
      ],
    });
    const repeated = await createAlert(OWNER, { threshold: 1_000_001, currency: "USD", channels: ["email", "email"] });
    expect(repeated.status).toBe(422);
    expect(repeated.body.error.details).toEqual([
      { field: "threshold", message: "must be at most 1000000" },
      { field: "channels", message: "must not repeat a channel" },
    ]);
    const unknown = await createAlert(OWNER, { threshold: 5, currency: "USD", channels: ["sms"] });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details).toEqual([{ field: "channels", message: "must each be one of: email" }]);
  });

  it("the gateway's own 422 for missing and mistyped fields, before billing is asked", async () => {
    const before = calls().length;
    const res = await createAlert(OWNER, { threshold: "10", channels: "email" });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([
      { field: "threshold", message: "must be a number" },
      { field: "currency", message: "is required" },
      { field: "channels", message: "must be an array of strings" },
    ]);
    const mixed = await createAlert(OWNER, { threshold: 10, currency: "USD", channels: ["email", 1] });
    expect(mixed.status).toBe(422);
    expect(mixed.body.error.details).toEqual([{ field: "channels", message: "must be an array of strings" }]);
    expect(calls()).toHaveLength(before);
  });

  it("the 21st alert of an organization is 409 resource_conflict", async () => {
    // 19 already there, as billing would keep them; the 20th is still accepted.
    for (let i = 0; i < 19; i++) {
      stubs.state.alerts.push(
        create(AlertSchema, {
          id: `alr-seeded-${i}`,
          organizationId: "org-alr-capped",
          threshold: 100 + i,
          currency: "USD",
          channels: ["email"],
          createdAt: timestampFromDate(new Date("2025-03-01T09:00:00Z")),
        }),
      );
    }
    expect((await createAlert(CAPPED, { threshold: 500, currency: "USD", channels: ["email"] })).status).toBe(201);
    const res = await createAlert(CAPPED, { threshold: 600, currency: "USD", channels: ["email"] });
    expect(res.status).toBe(409);
    expect(res.body.error).toEqual({ code: "resource_conflict", message: "an organization can have at most 20 alerts", details: [] });
    // Another organization's alerts do not count against it.
    expect((await createAlert(OWNER, { threshold: 700, currency: "USD", channels: ["email"] })).status).toBe(201);
  });

  it("needs billing:write: billing:read is not enough", async () => {
    const before = calls().length;
    const res = await createAlert(READER, { threshold: 10, currency: "USD", channels: ["email"] });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({
      code: "insufficient_permissions",
      message: "this action requires the billing:write permission",
    });
    expect((await createAlert("tok-unknown", { threshold: 10, currency: "USD", channels: ["email"] })).status).toBe(401);
    expect(calls()).toHaveLength(before);
  });

  it("a POST retried with the same Idempotency-Key creates the alert once and replays the 201", async () => {
    const before = calls().length;
    const body = { threshold: 25, currency: "USD", channels: ["email"] };
    const first = await createAlert(OWNER, body, { "idempotency-key": "alr-retry-1" });
    const again = await createAlert(OWNER, body, { "idempotency-key": "alr-retry-1" });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data).toEqual(first.body.data);
    expect(calls()).toHaveLength(before + 1);
    const otherRequest = await createAlert(OWNER, { ...body, threshold: 26 }, { "idempotency-key": "alr-retry-1" });
    expect(otherRequest.status).toBe(422);
    expect(calls()).toHaveLength(before + 1);
  });
});
