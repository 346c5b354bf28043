/**
 * The spec an agent watches carries the W3C trace context of the request that
 * last changed it, so the agent's work joins that request's trace.
 */
import { context, trace } from "@opentelemetry/api";
import { NodeSDK, tracing } from "@opentelemetry/sdk-node";
import { ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, expect, it } from "vitest";
import { completeBackup, createDb, createHarness, type Harness, registerAgent, report, specOf } from "./harness.ts";

const sdk = new NodeSDK({
  serviceName: "databases-test",
  spanProcessors: [new tracing.SimpleSpanProcessor(new tracing.InMemorySpanExporter())],
});
let h: Harness;
const ORG = "org-trace";
const AGENT = "agent-trace";

beforeAll(async () => {
  sdk.start();
  h = await createHarness();
  await registerAgent(h, AGENT, { regions: ["fsn1"] });
});

afterAll(async () => {
  await h?.close();
  await sdk.shutdown();
});

/** Runs `fn` as a request with a span of its own; answers the traceparent that span propagates. */
async function asRequest<T>(fn: () => Promise<T>): Promise<{ result: T; traceparent: string }> {
  const span = trace.getTracer("test").startSpan("request");
  try {
    const result = await context.with(trace.setSpan(context.active(), span), fn);
    const { traceId, spanId } = span.spanContext();
    return { result, traceparent: `00-${traceId}-${spanId}-01` };
  } finally {
    span.end();
  }
}

it("carries the context of the create, then of each later request that changes the spec, and none after a background change", async () => {
  const create = await asRequest(() => createDb(h, ORG, { region: "fsn1" }));
  const id = create.result.database!.id;
  expect((await specOf(h, AGENT, id))!.traceContext).toEqual({ traceparent: create.traceparent });

  // Reading changes nothing the agent is to do.
  await asRequest(() => h.dbs.getDatabase({ organizationId: ORG, id }));
  expect((await specOf(h, AGENT, id))!.traceContext).toEqual({ traceparent: create.traceparent });

  // Running at last, the database gets its first backup, which no request asked for: a trace of its own.
  await report(h, AGENT, id, ObservedState.RUNNING);
  const first = (await specOf(h, AGENT, id))!;
  expect(first.backupIds).toHaveLength(1);
  expect(first.traceContext).toEqual({});
  await completeBackup(h, AGENT, id, first.backupIds[0]!);

  const backup = await asRequest(() => h.dbs.createBackup({ organizationId: ORG, databaseId: id }));
  expect((await specOf(h, AGENT, id))!.traceContext).toEqual({ traceparent: backup.traceparent });

  // A spec change after the backup was asked for: the agent's work now is that change's.
  const resize = await asRequest(() => h.dbs.resizeDatabase({ organizationId: ORG, id, tier: "small" }));
  const spec = (await specOf(h, AGENT, id))!;
  expect(spec.backupIds).toEqual([backup.result.backup!.id]);
  expect(spec.traceContext).toEqual({ traceparent: resize.traceparent });
  await report(h, AGENT, id, ObservedState.RUNNING);

  const stop = await asRequest(() => h.dbs.stopDatabase({ organizationId: ORG, id }));
  expect((await specOf(h, AGENT, id))!.traceContext).toEqual({ traceparent: stop.traceparent });
});
