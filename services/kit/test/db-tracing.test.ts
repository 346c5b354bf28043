/**
 * PostgreSQL calls as spans: real queries on a real server, recorded by the
 * SDK the services run, in memory.
 */
import { context, trace } from "@opentelemetry/api";
import { NodeSDK, tracing } from "@opentelemetry/sdk-node";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { traceDatabaseCalls } from "../src/db-tracing.ts";
import { createPool, withTransaction } from "../src/index.ts";

const exporter = new tracing.InMemorySpanExporter();
const processor = new tracing.SimpleSpanProcessor(exporter);
const sdk = new NodeSDK({ serviceName: "kit-test", spanProcessors: [processor] });
let meta: TestDatabase;

beforeAll(async () => {
  sdk.start();
  traceDatabaseCalls();
  meta = await createTestDatabase("kit_tracing");
});

afterAll(async () => {
  await meta?.drop();
  await sdk.shutdown();
});

beforeEach(() => exporter.reset());

const tracer = trace.getTracer("test");
async function dbSpans() {
  await processor.forceFlush();
  return exporter.getFinishedSpans().filter((s) => s.attributes["db.system"] === "postgresql");
}

it("makes each query within a trace a child span with its statement and no values", async () => {
  const pool = createPool(meta.url, "public", 2);
  try {
    const root = tracer.startSpan("request");
    await context.with(trace.setSpan(context.active(), root), async () => {
      await pool.query("SELECT $1::text AS secret", ["hunter2"]);
      await withTransaction(pool, (c) => c.query("SELECT 'literal-secret' AS x"));
      await pool.query("SELECT no_such_column").catch(() => {});
    });
    root.end();

    const spans = await dbSpans();
    expect(spans.map((s) => s.attributes["db.statement"])).toEqual([
      "SELECT $1::text AS secret",
      "BEGIN",
      "SELECT '?' AS x",
      "COMMIT",
      "SELECT no_such_column",
    ]);
    for (const s of spans) {
      expect(s.spanContext().traceId).toBe(root.spanContext().traceId);
      expect(s.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
      expect(s.attributes["db.operation"]).toBe(String(s.attributes["db.statement"]).split(" ")[0]);
      expect(s.attributes["server.address"]).toBeTruthy();
      expect(JSON.stringify(s.attributes)).not.toMatch(/hunter2|literal-secret/);
    }
    expect(spans.at(-1)!.status.code).toBe(2); // ERROR
  } finally {
    await pool.end();
  }
});

it("makes no span of a query outside any trace", async () => {
  const pool = createPool(meta.url, "public", 1);
  try {
    await pool.query("SELECT 1");
    expect(await dbSpans()).toEqual([]);
  } finally {
    await pool.end();
  }
});

it("keeps a query that waited for a pooled client in its own request's trace", async () => {
  const pool = createPool(meta.url, "public", 1);
  try {
    const a = tracer.startSpan("a");
    const b = tracer.startSpan("b");
    // a holds the only client while b's query waits; a's release hands it to b's waiting callback.
    await Promise.all([
      context.with(trace.setSpan(context.active(), a), () => pool.query("SELECT pg_sleep(0.2), 'a'")),
      context.with(trace.setSpan(context.active(), b), () => pool.query("SELECT 'b'")),
    ]);
    a.end();
    b.end();
    const byStatement = new Map((await dbSpans()).map((s) => [s.attributes["db.statement"], s.parentSpanContext?.spanId]));
    expect(byStatement.get("SELECT pg_sleep(0.2), '?'")).toBe(a.spanContext().spanId);
    expect(byStatement.get("SELECT '?'")).toBe(b.spanContext().spanId);
  } finally {
    await pool.end();
  }
});
