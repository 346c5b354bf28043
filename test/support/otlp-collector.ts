/**
 * A minimal OTLP/HTTP JSON trace receiver, as Jaeger would be, for test/e2e/tracing.test.ts and the benches: the stack's
 * processes export to it (OTEL_EXPORTER_OTLP_ENDPOINT, http/json), and {@link breakdown} answers where the time
 * of the traces asked for went, span name by span name.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface CollectedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
}

export interface Collector {
  /** The environment that makes a stack's processes export here, quickly. */
  env: Record<string, string>;
  spans: CollectedSpan[];
  close(): void;
}

export async function startCollector(): Promise<Collector> {
  const spans: CollectedSpan[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const doc = JSON.parse(body);
        for (const rs of doc.resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a: { key: string }) => a.key === "service.name")?.value?.stringValue;
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                service,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                name: s.name,
                kind: s.kind,
                startMs: Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000,
                endMs: Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000,
                attributes: Object.fromEntries(
                  (s.attributes ?? []).map((a: { key: string; value: Record<string, unknown> }) => [
                    a.key,
                    a.value.stringValue ?? a.value.intValue ?? a.value.boolValue,
                  ]),
                ),
              });
        }
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  const port = await new Promise<number>((r) => server.listen(0, "127.0.0.1", () => r((server.address() as AddressInfo).port)));
  return {
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "200",
    },
    spans,
    close: () => server.close(),
  };
}

/** A fresh sampled W3C traceparent and its trace id. */
export function newTraceparent(): { traceId: string; traceparent: string } {
  const traceId = randomBytes(16).toString("hex");
  return { traceId, traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` };
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length / 2) - 1)]!;
const max = (xs: number[]) => Math.max(...xs);

/**
 * Where the time of the traces `traceIds` went: for each span name (its service before it; PostgreSQL and Redis
 * calls left out, each process's own steps kept), in how many of the traces it is, its start after the trace's
 * first span (p50) and its duration (p50, max), ordered by start: a markdown table.
 */
export function breakdown(spans: readonly CollectedSpan[], traceIds: readonly string[]): string {
  const rows = new Map<string, { starts: number[]; durations: number[]; traces: Set<string> }>();
  for (const traceId of traceIds) {
    const trace = spans.filter((s) => s.traceId === traceId);
    if (trace.length === 0) continue;
    const t0 = Math.min(...trace.map((s) => s.startMs));
    for (const s of trace) {
      if (s.attributes["db.system"] !== undefined) continue;
      const key = `${s.service} · ${s.name}`;
      let r = rows.get(key);
      if (!r) {
        r = { starts: [], durations: [], traces: new Set() };
        rows.set(key, r);
      }
      r.starts.push(s.startMs - t0);
      r.durations.push(s.endMs - s.startMs);
      r.traces.add(traceId);
    }
  }
  const f = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));
  const lines = [...rows.entries()]
    .sort((a, b) => p50(a[1].starts) - p50(b[1].starts))
    .map(([name, r]) => `| ${name} | ${r.traces.size} | ${f(p50(r.starts))} | **${f(p50(r.durations))}** | ${f(max(r.durations))} |`);
  return ["| span (service · name) | traces | starts at p50 ms | duration p50 ms | max ms |", "|---|---|---|---|---|", ...lines].join("\n");
}
