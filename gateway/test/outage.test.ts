/**
 * An upstream that is down: the gateway answers 503 (try again), its health
 * says degraded naming the upstream, and the caller's rate-limit budget is
 * not spent on the wrong subject while identity cannot say who the caller is.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

/** A port nothing listens on: connections to it are refused. */
async function refusingUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

let stubs: Stubs;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set("tok-outage", principal({ org: "org-outage", permissions: ALL_PERMISSIONS, plan: "internal" }));
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await stubs?.close();
});

describe("an upstream outage", () => {
  it("identity unreachable while authenticating: 503 every time, the IP's budget untouched", async () => {
    const gw = await startGateway(
      { ...stubs, identityUrl: await refusingUrl() },
      { IP_RATE_LIMIT_PER_MINUTE: "3", IP_RATE_LIMIT_PER_DAY: "100" },
    );
    gateways.push(gw);
    // Twice the IP's minute budget: before the fix the fourth answer was a 429.
    for (let i = 0; i < 6; i++) {
      const res = await api(gw.url, "/v1/databases", { token: "tok-outage" });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("service_unavailable");
      expect(res.headers.get("retry-after")).toBe("5");
      // The headers still describe the IP's windows, as they stand.
      expect(res.headers.get("x-ratelimit-limit")).toBe("3");
      expect(res.headers.get("x-ratelimit-remaining")).toBe("3");
    }
    // What the client does wrong still costs: the budget was whole.
    const unknown = await api(gw.url, "/v1/nowhere");
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get("x-ratelimit-remaining")).toBe("2");
  });

  it("health says degraded and names the upstream that does not answer", async () => {
    const healthy = await startGateway(stubs);
    gateways.push(healthy);
    expect((await api(healthy.url, "/healthz")).body).toEqual({ status: "ok", redis: "disabled", maintenance: false });

    const gw = await startGateway({ ...stubs, databasesUrl: await refusingUrl() });
    gateways.push(gw);
    const res = await api(gw.url, "/healthz");
    // Still 200: this gateway serves (503s that say "try again"); a load balancer must not drop it.
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: "degraded",
      redis: "disabled",
      maintenance: false,
      upstreams: { identity: "ok", databases: "unreachable", billing: "ok" },
      // The request path says the same: the databases client gets UNAVAILABLE at once (nothing hangs, so not unhealthy).
      checks: { auth: "ok", rate_limit: "ok", databases: "unavailable", billing: "ok" },
    });
  });
});
