/**
 * One trace covers a public request: the gateway's server span, its internal
 * Connect call, and the databases service's server span, exported over OTLP
 * by separate processes and joined by W3C trace context.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createApi, waitFor } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

interface Span {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
}

const spans: Span[] = [];
let collector: http.Server;
let stack: Stack;
let meta: TestDatabase;

/** A minimal OTLP/HTTP JSON trace receiver, as Jaeger would be. */
function startCollector(): Promise<number> {
  collector = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const doc = JSON.parse(body);
        for (const rs of doc.resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a: any) => a.key === "service.name")?.value?.stringValue;
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                service,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                name: s.name,
                kind: s.kind,
              });
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  return new Promise((r) => collector.listen(0, "127.0.0.1", () => r((collector.address() as AddressInfo).port)));
}

beforeAll(async () => {
  const port = await startCollector();
  meta = await createTestDatabase("e2e_tracing");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "200",
    },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
  collector?.close();
});

it("joins gateway and databases spans of one request into the caller's trace", async () => {
  const api = createApi(stack.baseUrl);
  await api.signup("trace");
  const created = await api.post("/v1/databases", { name: "traced", region: "fsn1", tier: "micro" });
  expect(created.status).toBe(201);

  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const res = await api.get(`/v1/databases/${created.body.data.id}`, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
  expect(res.status).toBe(200);

  const trace = await waitFor(
    async () => {
      const t = spans.filter((s) => s.traceId === traceId);
      return t.some((s) => s.service === "databases") && t.some((s) => s.service === "gateway" && s.kind === 3) ? t : undefined;
    },
    30_000,
    "spans of the trace",
  );

  const root = trace.find((s) => s.service === "gateway" && s.kind === 2)!; // SERVER
  expect(root.parentSpanId).toBe("00f067aa0ba902b7");
  const client = trace.find((s) => s.service === "gateway" && s.kind === 3 && s.name.endsWith("DatabasesService/GetDatabase"))!; // CLIENT
  expect(client.parentSpanId).toBe(root.spanId);
  const server = trace.find((s) => s.service === "databases" && s.name.endsWith("DatabasesService/GetDatabase"))!;
  expect(server.parentSpanId).toBe(client.spanId);
  // The gateway's auth call to identity belongs to the same trace (or was served from its cache).
  for (const s of trace.filter((x) => x.service === "identity")) expect(s.traceId).toBe(traceId);
});
