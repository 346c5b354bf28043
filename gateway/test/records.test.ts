/**
 * The response records (routes/record.ts): one declaration gives both the
 * schema the document publishes and the mapping the handler answers with, so
 * an optional field is absent from the answer exactly when the message leaves
 * it unset, and every answer validates against the published schema.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { REGIONS, TIERS, type DatabaseStatusName } from "@dbaas/catalogue";
import { DatabaseSchema, DatabaseStatus, OperationSchema, PoolerSchema, RestoredFromSchema } from "@dbaas/proto/databases";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, expectTypeOf, it } from "vitest";
import { openApiDocument } from "../src/routes/openapi.ts";
import { constant, field, optional, record, str } from "../src/routes/record.ts";
import { DATABASE, DATABASE_LIST_ITEM, OPERATION, POOLER, RESPONSE_SCHEMAS } from "../src/routes/responses.ts";
import { ROUTES } from "../src/routes/table.ts";

const doc = openApiDocument(ROUTES, "https://api.example.net");
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, validateFormats: false });
ajv.addVocabulary(["openapi", "info", "servers", "paths", "components", "security", "tags"]);
ajv.addSchema(doc, "openapi.json");

/** Whether `value` is what the document says the schema `name` is; the errors when it is not. */
function conforms(name: string, value: unknown) {
  const validate =
    ajv.getSchema(`openapi.json#/components/schemas/${name}`) ?? ajv.compile({ $ref: `openapi.json#/components/schemas/${name}` });
  return validate(value) ? [] : validate.errors;
}

const at = timestampFromDate(new Date("2026-01-05T10:00:00Z"));

const database = (extra: MessageInitShape<typeof DatabaseSchema> = {}) =>
  create(DatabaseSchema, {
    id: "db-3f9a1c2e",
    name: "orders",
    region: REGIONS[0]!.code,
    tier: TIERS[0]!.name,
    version: "17",
    statusEnum: DatabaseStatus.RUNNING,
    status: "running",
    host: "db-3f9a1c2e.db.example.com",
    port: 5432,
    database: "defaultdb",
    username: "dbadmin",
    connectionString: "postgresql://dbadmin:********@db-3f9a1c2e.db.example.com:5432/defaultdb?sslmode=require",
    createdAt: at,
    updatedAt: at,
    ...extra,
  });

describe("a record declared once", () => {
  const THING = record<{ id: string; note: string; when?: string }>("A thing.")({
    id: field(str(), (t) => t.id),
    kind: constant("thing"),
    note: optional(str("Absent when empty."), (t) => t.note),
    when: optional(str("Absent when unset."), (t) => t.when),
  });

  it("gives a closed schema requiring every field but the optional ones, in declaration order", () => {
    expect(THING.schema).toEqual({
      type: "object",
      description: "A thing.",
      properties: {
        id: { type: "string" },
        kind: { const: "thing" },
        note: { type: "string", description: "Absent when empty." },
        when: { type: "string", description: "Absent when unset." },
      },
      required: ["id", "kind"],
      additionalProperties: false,
    });
  });

  it("maps a message with the optional fields absent when empty or unset, present otherwise", () => {
    expect(THING.map({ id: "t-1", note: "" })).toStrictEqual({ id: "t-1", kind: "thing" });
    const full = THING.map({ id: "t-1", note: "hello", when: "now" });
    expect(full).toStrictEqual({ id: "t-1", kind: "thing", note: "hello", when: "now" });
    expect(Object.keys(full)).toEqual(Object.keys(THING.schema.properties as object));
  });
});

describe("the records the routes answer", () => {
  it("have their answers' types inferred from the declaration", () => {
    const db = DATABASE.map(database());
    expectTypeOf(db.status).toEqualTypeOf<DatabaseStatusName>();
    expectTypeOf(db.type).toEqualTypeOf<"postgres">();
    expectTypeOf(db.port).toEqualTypeOf<number>();
    expectTypeOf(db.created_at).toEqualTypeOf<string | null>();
    expectTypeOf(db.status_reason).toEqualTypeOf<string | undefined>();
    expectTypeOf(db.restored_from).toEqualTypeOf<{ database_id: string; restore_time: string | null } | undefined>();
    expectTypeOf(OPERATION.map).returns.toHaveProperty("from");
  });

  it("are the schemas the document publishes", () => {
    const schemas = (doc.components as { schemas: Record<string, unknown> }).schemas;
    expect(schemas.Database).toBe(DATABASE.schema);
    expect(schemas.Database).toBe(RESPONSE_SCHEMAS.Database);
  });

  it("a database: status_reason and restored_from absent until there is one, and either way what the document says", () => {
    const plain = DATABASE.map(database());
    expect(plain).not.toHaveProperty("status_reason");
    expect(plain).not.toHaveProperty("restored_from");
    expect(plain).toMatchObject({ id: "db-3f9a1c2e", type: "postgres", status: "running", created_at: "2026-01-05T10:00:00.000Z" });
    expect(conforms("Database", plain)).toEqual([]);

    const failedRestored = DATABASE.map(
      database({
        statusEnum: DatabaseStatus.FAILED,
        status: "failed",
        statusReason: "the server did not start",
        restoredFrom: create(RestoredFromSchema, { databaseId: "db-1a2b3c4d", restoreTime: at }),
      }),
    );
    expect(failedRestored).toMatchObject({
      status: "failed",
      status_reason: "the server did not start",
      restored_from: { database_id: "db-1a2b3c4d", restore_time: "2026-01-05T10:00:00.000Z" },
    });
    expect(conforms("Database", failedRestored)).toEqual([]);

    // A list item carries exactly its seven fields, never restored_from.
    const item = DATABASE_LIST_ITEM.map(
      database({ restoredFrom: create(RestoredFromSchema, { databaseId: "db-1a2b3c4d", restoreTime: at }) }),
    );
    expect(Object.keys(item)).toEqual(["id", "name", "region", "tier", "version", "status", "created_at"]);
    expect(conforms("DatabaseListItem", item)).toEqual([]);
  });

  it("a pooler: its address absent, all three together, where its host cannot run one", () => {
    const none = POOLER.map(
      create(PoolerSchema, {
        enabled: false,
        mode: "transaction",
        poolSize: 20,
        maxClientConnections: 1000,
        reason: "no PgBouncer on this host",
      }),
    );
    expect(none).toStrictEqual({
      enabled: false,
      mode: "transaction",
      pool_size: 20,
      max_client_connections: 1000,
      reason: "no PgBouncer on this host",
    });
    expect(conforms("Pooler", none)).toEqual([]);
    const running = POOLER.map(
      create(PoolerSchema, {
        enabled: true,
        mode: "session",
        poolSize: 20,
        maxClientConnections: 1000,
        host: "db-3f9a1c2e-pooler.db.example.com",
        port: 16400,
        connectionString: "postgresql://dbadmin:********@db-3f9a1c2e-pooler.db.example.com:16400/defaultdb?sslmode=require",
      }),
    );
    expect(Object.keys(running)).toEqual(["enabled", "mode", "pool_size", "max_client_connections", "host", "port", "connection_string"]);
    expect(conforms("Pooler", running)).toEqual([]);
  });

  it("an operation: reason, from and to on a failover only", () => {
    const base = { id: "op-1", databaseId: "db-3f9a1c2e", status: "succeeded", startedAt: at, finishedAt: at };
    const restart = OPERATION.map(create(OperationSchema, { ...base, type: "restart", reason: "ignored", fromMember: "node-a" }));
    expect(restart).toStrictEqual({
      id: "op-1",
      type: "restart",
      status: "succeeded",
      started_at: "2026-01-05T10:00:00.000Z",
      finished_at: "2026-01-05T10:00:00.000Z",
      error: null,
    });
    expect(conforms("Operation", restart)).toEqual([]);
    const failover = OPERATION.map(
      create(OperationSchema, { ...base, type: "failover", reason: "lease lost", fromMember: "node-a", toMember: "node-b" }),
    );
    expect(failover).toMatchObject({ reason: "lease lost", from: "node-a", to: "node-b" });
    expect(conforms("Operation", failover)).toEqual([]);
  });
});
