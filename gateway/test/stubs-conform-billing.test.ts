/**
 * The billing stub answers nothing the real billing service would not (as stubs-conform.test.ts does for the
 * databases service): every billing route of the gateway's route table is driven through one gateway over the
 * stubs and one whose billing upstream is the real service (its handlers and migrations on a real PostgreSQL, the
 * test card processor behind its adapter), and the two answers must agree in status and shape. Requests: ids that
 * name nothing, the collections, bodies the gateway lets through — a card, a declined token, an alert and one the
 * rules refuse — each sent to both sides in the same order, so both hold the same records when the next one comes.
 */
import { createLogger, startServer, type RunningServer } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../../services/billing/src/routes.ts";
import { createTestContext } from "../../services/billing/test/helpers.ts";
import { BILLING_ROUTES } from "../src/routes/table-billing.ts";
import { answer, pathNamingNothing } from "./support/conform.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, SECRET, startStubs, type Stubs } from "./support/stubs.ts";

const TOKEN = "tok-conform-billing";

/** Bodies per route, sent in order to both sides; a route not named sends none. */
const BODIES: Record<string, unknown[]> = {
  "POST /v1/billing/payment-methods": [
    { type: "card", token: "tok_visa" },
    { type: "card", token: "tok_amex" },
    { type: "card", token: "tok_not_a_card" },
  ],
  "PATCH /v1/billing/payment-methods/:id": [{ default: true }],
  "POST /v1/billing/alerts": [
    { threshold: 50, channels: ["email"] },
    { threshold: 5_000_000, channels: ["email"] },
  ],
};

let stubs: Stubs;
let billing: Awaited<ReturnType<typeof createTestContext>>;
let real: RunningServer;
let overStubs: TestGateway;
let overReal: TestGateway;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-conform", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  billing = await createTestContext("2026-03-20T12:00:00Z");
  real = await startServer({ port: 0, routes: routes(billing.ctx), internalSecret: SECRET, log: createLogger("billing-conform") });
  overStubs = await startGateway(stubs);
  overReal = await startGateway({ ...stubs, billingUrl: real.url });
});

afterAll(async () => {
  await overStubs?.close();
  await overReal?.close();
  await real?.close();
  await billing?.close();
  await stubs?.close();
});

describe("the billing stub answers as the real billing service does", () => {
  it("covers every billing route of the table", () => {
    expect(BILLING_ROUTES.length).toBeGreaterThanOrEqual(10);
  });

  for (const route of BILLING_ROUTES) {
    const key = `${route.method} ${route.path}`;
    it(key, async () => {
      const path = pathNamingNothing(route);
      for (const body of BODIES[key] ?? [undefined]) {
        const request = { method: route.method, token: TOKEN, body, conform: false };
        const [stub, service] = await Promise.all([api(overStubs.url, path, request), api(overReal.url, path, request)]);
        expect(answer(stub), `${key} ${JSON.stringify(body) ?? ""}: the stub's answer (left) against the service's`).toEqual(
          answer(service),
        );
      }
    });
  }
});
