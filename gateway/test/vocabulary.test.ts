import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DatabaseSchema, DatabaseStatus } from "@dbaas/proto/databases";
import { Plan } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

/**
 * Issue 11: roles, plans and database statuses cross the wire as enums and
 * become the public strings in gateway/src/routes/mappers.ts. The stubs here
 * answer the way a service does once the deprecated names are gone: enums only.
 */
let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-vocab";
const ORG = "org-vocab";

function seed(id: string, statusEnum: DatabaseStatus) {
  const db = create(DatabaseSchema, {
    id,
    organizationId: ORG,
    name: `vocab-${id}`,
    region: "fsn1",
    tier: "micro",
    version: "17",
    statusEnum,
    host: `${id}.db.example.test`,
    port: 5432,
    database: "defaultdb",
    username: "dbadmin",
    connectionString: `postgresql://dbadmin:********@${id}.db.example.test:5432/defaultdb?sslmode=require`,
    createdAt: timestampFromDate(new Date("2025-03-01T10:00:00Z")),
    updatedAt: timestampFromDate(new Date("2025-03-01T10:00:00Z")),
  });
  stubs.state.databases.set(id, { db, password: "unused" });
}

beforeAll(async () => {
  stubs = await startStubs();
  // A principal with the plan as the enum alone: enterprise's limits, not the free plan's fallback.
  const p = principal({ org: ORG, permissions: ALL_PERMISSIONS, plan: "" });
  p.planEnum = Plan.ENTERPRISE;
  stubs.state.tokens.set(TOKEN, p);
  gw = await startGateway(stubs);
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("enums from the wire, strings in the JSON", () => {
  it("shows a database status sent as the enum alone by its public name", async () => {
    seed("db-vocabrun", DatabaseStatus.RUNNING);
    const res = await api(gw.url, "/v1/databases/db-vocabrun", { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe("running");
    expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
  });

  it("a status this build has no name for is the upstream's fault: 500, not an undocumented string", async () => {
    seed("db-vocabodd", 42 as DatabaseStatus);
    const res = await api(gw.url, "/v1/databases/db-vocabodd", { token: TOKEN });
    expect(res.status).toBe(500);
    expect(res.body.error).toMatchObject({ code: "internal_error", message: "internal error" });
  });

  it("sends a status filter as the enum and, for a service that predates it, the name", async () => {
    const res = await api(gw.url, "/v1/databases?status=stopped", { token: TOKEN });
    expect(res.status).toBe(200);
    const seen = stubs.state.seen.get("listDatabases")!.at(-1) as { statusEnum: DatabaseStatus; status: string };
    expect(seen).toMatchObject({ statusEnum: DatabaseStatus.STOPPED, status: "stopped" });
  });
});
