/**
 * The identity stub answers nothing the real identity service would not (as stubs-conform.test.ts does for the
 * databases service). The stub serves only what gateway tests over the stubs need — sign-up, log-in,
 * authentication, the organization and API keys; members, invitations, the organization's changes and its
 * transfer are tested against the real identity (support/identity.ts), so they have no stub to compare. Each
 * stubbed route is driven through a gateway over the stubs and one over the real service (its handlers and
 * migrations on a real PostgreSQL), each side with a credential its identity issued, and the answers must agree
 * in status and shape.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTES } from "../src/routes/table.ts";
import { answer, pathNamingNothing } from "./support/conform.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { startRealIdentity, type RealIdentity } from "./support/identity.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

/** The stub's fixed answers: this e-mail is taken, this password is right (support/stubs.ts). */
const TAKEN = "taken@example.com";
const PASSWORD = "correct horse";
const STUB_TOKEN = "tok-conform-identity";

const signup = (email: string) => ({ email, password: PASSWORD, name: "Conform", organization_name: "Conform" });

/** The identity routes the stub serves, with bodies sent in order to both sides (a route not named sends none). */
const STUBBED: Record<string, unknown[]> = {
  "POST /v1/auth/signup": [signup(TAKEN), signup("new-conform@example.com"), { ...signup("short@example.com"), password: "short" }],
  "POST /v1/auth/token": [
    { email: TAKEN, password: PASSWORD },
    { email: TAKEN, password: "not the password" },
  ],
  "GET /v1/organization": [undefined],
  "POST /v1/organization/api-keys": [{ name: "ci" }, { name: "ci", scopes: ["not:a-scope"] }],
  "GET /v1/organization/api-keys": [undefined],
  "DELETE /v1/organization/api-keys/:id": [undefined],
};

let stubs: Stubs;
let identity: RealIdentity;
let overStubs: TestGateway;
let overReal: TestGateway;
let realToken: string;

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(STUB_TOKEN, principal({ org: "org-conform", permissions: ALL_PERMISSIONS, plan: "free" }));
  identity = await startRealIdentity(stubs);
  overStubs = await startGateway(stubs);
  overReal = await startGateway({ ...stubs, identityUrl: identity.url });
  // The real side's owner, whose e-mail is then taken there as the stub's is.
  const owner = await api(overReal.url, "/v1/auth/signup", { method: "POST", body: signup(TAKEN), conform: false });
  expect(owner.status).toBe(201);
  realToken = owner.body.data.access_token;
});

afterAll(async () => {
  await overStubs?.close();
  await overReal?.close();
  await identity?.close();
  await stubs?.close();
});

const compared = ROUTES.filter((r) => `${r.method} ${r.path}` in STUBBED);

describe("the identity stub answers as the real identity service does", () => {
  it("covers every route the stub serves", () => {
    expect(compared.map((r) => `${r.method} ${r.path}`).sort()).toEqual(Object.keys(STUBBED).sort());
  });

  for (const route of compared) {
    const key = `${route.method} ${route.path}`;
    it(key, async () => {
      const path = pathNamingNothing(route);
      for (const body of STUBBED[key]!) {
        const request = (token: string) => ({ method: route.method, token, body, conform: false });
        const [stub, service] = await Promise.all([
          api(overStubs.url, path, request(STUB_TOKEN)),
          api(overReal.url, path, request(realToken)),
        ]);
        expect(answer(stub), `${key} ${JSON.stringify(body) ?? ""}: the stub's answer (left) against the service's`).toEqual(
          answer(service),
        );
      }
    });
  }
});
