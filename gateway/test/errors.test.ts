import { createServer } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classify } from "../src/errors.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-errors";

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-err", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  gw = await startGateway(stubs, { UPSTREAM_TIMEOUT_MS: "300" });
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe("Connect code → HTTP status and public code", () => {
  const table: Array<[Code, number, string]> = [
    [Code.InvalidArgument, 422, "validation_error"],
    [Code.Unauthenticated, 500, "internal_error"], // databases never judges end users: a credential misconfiguration
    [Code.PermissionDenied, 403, "insufficient_permissions"],
    [Code.NotFound, 404, "resource_not_found"],
    [Code.AlreadyExists, 409, "resource_conflict"],
    [Code.FailedPrecondition, 409, "resource_conflict"],
    [Code.Aborted, 409, "resource_conflict"],
    [Code.ResourceExhausted, 429, "rate_limit_exceeded"],
    [Code.Unavailable, 503, "service_unavailable"],
    [Code.DeadlineExceeded, 504, "upstream_timeout"],
    [Code.Internal, 500, "internal_error"],
    [Code.Unknown, 500, "internal_error"],
    [Code.Unimplemented, 500, "internal_error"],
    [Code.DataLoss, 500, "internal_error"],
    [Code.Canceled, 500, "internal_error"],
  ];

  it.each(table)("code %i → %i %s", async (code, status, publicCode) => {
    const res = await api(gw.url, `/v1/databases/db-fail${code}`, { token: TOKEN, conform: false });
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(publicCode);
    expect(res.body.meta.request_id).toBe(res.headers.get("x-request-id"));
    expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
    if (status >= 500) {
      // Upstream messages may name hosts; they never reach the client.
      expect(res.text).not.toContain("10.0.0.7");
      expect(res.text).not.toMatch(/at .*\.ts:\d+/);
    } else {
      expect(res.body.error.message).toContain("injected failure");
    }
    if (status === 429 || status === 503) expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
  });

  it.each([
    ["payment_required", 402],
    ["maintenance_mode", 503],
    ["rate_limit_exceeded", 429],
    ["resource_conflict", 409],
  ])("an ErrorReason %s overrides the code's status (%i)", async (reason, status) => {
    const res = await api(gw.url, `/v1/databases/db-reason${reason.replaceAll("_", "")}`, { token: TOKEN, conform: false });
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(reason);
  });

  it("an ErrorReason naming no public code is ignored", async () => {
    const res = await api(gw.url, "/v1/databases/db-reasonmadeup", { token: TOKEN, conform: false });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("resource_conflict");
  });

  it("field violations become details", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "stub-refuses", region: "fsn1", tier: "micro" },
    });
    expect(res.status).toBe(422);
    expect(res.body.error).toEqual({
      code: "validation_error",
      message: "request failed validation",
      details: [
        { field: "name", message: "must be 3-63 characters" },
        { field: "region", message: "must be one of: fsn1, nbg1, hel1" },
      ],
    });
  });

  it("payment_required from create is 402", async () => {
    const res = await api(gw.url, "/v1/databases", {
      method: "POST",
      token: TOKEN,
      body: { name: "big-one", region: "fsn1", tier: "large" },
    });
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe("payment_required");
  });

  it("a slow upstream is cut at the deadline: 504, not a hang", async () => {
    const started = Date.now();
    const res = await api(gw.url, "/v1/databases/db-slow3000", { token: TOKEN });
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe("upstream_timeout");
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("non-Connect errors are 500 with a generic message", () => {
    const { error, unexpected } = classify(new TypeError("cannot read properties of undefined (reading 'x')"));
    expect(error.status).toBe(500);
    expect(error.message).toBe("internal error");
    expect(unexpected).toBe(true);
  });

  it("validation details are only taken from INVALID_ARGUMENT", () => {
    expect(classify(new ConnectError("gone", Code.NotFound)).error.details).toEqual([]);
  });
});

describe("upstream down", () => {
  let down: TestGateway;

  beforeAll(async () => {
    const port = await closedPort();
    down = await startGateway({
      identityUrl: stubs.identityUrl,
      databasesUrl: `http://127.0.0.1:${port}`,
      billingUrl: `http://127.0.0.1:${port}`,
    });
  });
  afterAll(() => down?.close());

  it("answers 503 in the envelope, quickly", async () => {
    const started = Date.now();
    const res = await api(down.url, "/v1/databases", { token: TOKEN });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe("service_unavailable");
    expect(res.text).not.toContain("127.0.0.1");
    expect(res.headers.get("retry-after")).toBe("5");
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("identity down is 503 too, not 401", async () => {
    const port = await closedPort();
    const noIdentity = await startGateway({ ...stubs, identityUrl: `http://127.0.0.1:${port}` });
    try {
      const res = await api(noIdentity.url, "/v1/databases", { token: TOKEN });
      expect(res.status).toBe(503);
      expect(res.headers.get("www-authenticate")).toBeNull();
      expect(res.headers.get("x-ratelimit-limit")).toMatch(/^\d+$/);
    } finally {
      await noIdentity.close();
    }
  });
});

describe("internal credential", () => {
  it("an upstream refusing the gateway's credential is a 500, not the client's 401", async () => {
    const other = await startStubs("a-different-secret");
    // Identity is the shared stub (right secret) so the client authenticates; databases refuses.
    const gw2 = await startGateway({ ...other, identityUrl: stubs.identityUrl });
    try {
      const res = await api(gw2.url, "/v1/databases", { token: TOKEN });
      expect(res.status).toBe(500);
      expect(res.body.error.code).toBe("internal_error");
      expect(res.headers.get("www-authenticate")).toBeNull();
    } finally {
      await gw2.close();
      await other.close();
    }
  });
});
