import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { createLogger, createPool, migrate, mintInternalToken, startServer, type RunningServer } from "@dbaas/kit";
import {
  GetUsageRequestSchema,
  GetUsageResponseSchema,
  RecordStatusEventsRequestSchema,
  RecordStatusEventsResponseSchema,
} from "@dbaas/proto/billing";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS_DIR } from "../services/billing/src/db/schema.ts";
import { createTestProcessor } from "../services/billing/src/processor/test-processor.ts";
import { routes } from "../services/billing/src/routes.ts";

// docs/product.md, Between the services: internal services speak gRPC too, so a tool built on @grpc/grpc-js
// (no Connect, no generated grpc-js stubs) can call them.

const SECRET = "grpc-js-test-secret";
const SCHEMA = "billing";
const SERVICE = "/dbaas.billing.v1.BillingService";
// The server's clock, fixed so expected usage is exact.
const NOW = new Date("2025-06-15T12:00:00Z");

let db: TestDatabase;
let pool: pg.Pool;
let server: RunningServer;
let client: grpc.Client;

beforeAll(async () => {
  db = await createTestDatabase("grpcjs");
  pool = createPool(db.url, SCHEMA);
  await migrate(pool, SCHEMA, MIGRATIONS_DIR);
  const clock = { now: () => new Date(NOW) };
  server = await startServer({
    port: 0,
    routes: routes({
      pool,
      clock,
      log: createLogger("billing-test"),
      processor: createTestProcessor(clock),
      storageMaxGapMs: 60_000,
      usageSampleRetentionDays: 40,
    }),
    internalSecret: SECRET,
    log: createLogger("billing-test"),
  });
  client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  await server?.close();
  await pool?.end();
  await db?.drop();
});

/** One unary call the way a plain grpc-js tool makes it: a path, a serializer, a deserializer. */
function unary<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  request: MessageShape<I>,
  metadata: grpc.Metadata,
): Promise<MessageShape<O>> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      `${SERVICE}/${method}`,
      (msg: MessageShape<I>) => Buffer.from(toBinary(input, msg)),
      (bytes: Buffer) => fromBinary(output, bytes),
      request,
      metadata,
      (err, res) => (err ? reject(err) : resolve(res!)),
    );
  });
}

function credentialed(): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("x-dbaas-internal-auth", mintInternalToken(SECRET, "grpc-tool"));
  return md;
}

const event = (eventId: string, status: string, at: string) => ({
  eventId,
  organizationId: "org-grpc",
  databaseId: "db-grpc",
  tier: "medium",
  status,
  occurredAt: timestampFromDate(new Date(at)),
});

describe("billing through @grpc/grpc-js", () => {
  it("records status events and reads usage", async () => {
    const request = create(RecordStatusEventsRequestSchema, {
      events: [event("evt-g1", "running", "2025-06-15T00:00:00Z"), event("evt-g2", "stopped", "2025-06-15T02:15:00Z")],
    });
    const first = await unary(
      "RecordStatusEvents",
      RecordStatusEventsRequestSchema,
      RecordStatusEventsResponseSchema,
      request,
      credentialed(),
    );
    expect(first.recorded).toBe(2);
    const again = await unary(
      "RecordStatusEvents",
      RecordStatusEventsRequestSchema,
      RecordStatusEventsResponseSchema,
      request,
      credentialed(),
    );
    expect(again.recorded).toBe(0);

    const usage = await unary(
      "GetUsage",
      GetUsageRequestSchema,
      GetUsageResponseSchema,
      create(GetUsageRequestSchema, { organizationId: "org-grpc" }),
      credentialed(),
    );
    expect(timestampDate(usage.periodStart!).toISOString()).toBe("2025-06-01T00:00:00.000Z");
    expect(timestampDate(usage.periodEnd!).toISOString()).toBe("2025-07-01T00:00:00.000Z");
    // 2.25 h at medium (0.12/h).
    expect(usage.computeHours).toMatchObject({ quantity: 2.25, amount: 0.27 });
    expect(usage.total).toBe(0.27);
    expect(usage.currency).toBe("USD");
  });

  it("maps validation errors to gRPC INVALID_ARGUMENT", async () => {
    const err = await unary(
      "GetUsage",
      GetUsageRequestSchema,
      GetUsageResponseSchema,
      create(GetUsageRequestSchema, { organizationId: "" }),
      credentialed(),
    ).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it("is refused with UNAUTHENTICATED without the internal credential", async () => {
    const err = await unary(
      "GetUsage",
      GetUsageRequestSchema,
      GetUsageResponseSchema,
      create(GetUsageRequestSchema, { organizationId: "org-grpc" }),
      new grpc.Metadata(),
    ).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(err?.code).toBe(16);
  });
});
