/**
 * Redis commands as spans: the gateway's own client (scripts included) on a
 * real Redis, recorded by the SDK the services run, in memory.
 */
import { context, trace } from "@opentelemetry/api";
import { NodeSDK, tracing } from "@opentelemetry/sdk-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { traceDatabaseCalls } from "../../services/kit/src/db-tracing.ts";
import { createRedisClient, type GatewayRedisClient } from "../src/redis.ts";
import { REDIS_URL, uniquePrefix } from "./support/redis.ts";

const exporter = new tracing.InMemorySpanExporter();
const processor = new tracing.SimpleSpanProcessor(exporter);
const sdk = new NodeSDK({ serviceName: "gateway-test", spanProcessors: [processor] });
let client: GatewayRedisClient;
const key = `${uniquePrefix()}:traced`;

beforeAll(async () => {
  sdk.start();
  traceDatabaseCalls();
  client = createRedisClient(REDIS_URL, false);
  await client.connect();
});

afterAll(async () => {
  await client?.del(key).catch(() => {});
  client?.destroy();
  await sdk.shutdown();
});

it("makes each command within a trace a child span named by the command, without its arguments", async () => {
  await client.set(`${key}:outside`, "x", { PX: 1_000 }); // no trace: no span
  const root = trace.getTracer("test").startSpan("request");
  await context.with(trace.setSpan(context.active(), root), async () => {
    await client.set(key, "stored-secret", { PX: 10_000 });
    await client.get(key);
    await client.claim(`${key}:claim`, "claim-secret", 1_000);
    await client.sendCommand(["NO_SUCH_COMMAND"]).catch(() => {});
  });
  root.end();
  await processor.forceFlush();

  const spans = exporter.getFinishedSpans().filter((s) => s.attributes["db.system"] === "redis");
  expect(spans.map((s) => s.name)).toEqual(["SET", "GET", expect.stringMatching(/^EVAL(SHA)?$/), "NO_SUCH_COMMAND"]);
  for (const s of spans) {
    expect(s.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
    expect(s.spanContext().traceId).toBe(root.spanContext().traceId);
    expect(s.attributes["db.statement"]).toBe(s.name);
    expect(s.attributes["server.address"]).toBeTruthy();
    expect(JSON.stringify(s.attributes)).not.toMatch(/secret|traced/);
  }
  expect(spans.at(-1)!.status.code).toBe(2); // ERROR
});
