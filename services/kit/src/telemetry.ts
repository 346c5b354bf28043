import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { ConnectError, type Interceptor } from "@connectrpc/connect";

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set, and is a
 * no-op otherwise. Call it first in a service's main. The exporter follows the
 * standard OTEL_* variables (OTLP over HTTP, protobuf unless
 * OTEL_EXPORTER_OTLP_PROTOCOL=http/json). Returns a shutdown hook that flushes
 * pending spans.
 */
export async function startTelemetry(serviceName: string): Promise<() => Promise<void>> {
  if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT) return async () => {};
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  const sdk = new NodeSDK({ serviceName, instrumentations: [] });
  sdk.start();
  enabled = true;
  return () => sdk.shutdown();
}

let enabled = false;

/**
 * Whether this process traces. Without an SDK every span is a no-op and the
 * propagator injects nothing, so the tracing interceptors and middleware are
 * left out altogether rather than paying for no-op spans on every call: they
 * are built after `startTelemetry` (first thing in every main).
 */
export function tracingEnabled(): boolean {
  return enabled;
}

const passThrough: Interceptor = (next) => next;

const tracer = () => trace.getTracer("dbaas");

// Headers is iterable but the propagation API wants a carrier with get/set.
const headerSetter = { set: (h: Headers, k: string, v: string) => h.set(k, v) };
const headerGetter = {
  get: (h: Headers, k: string) => h.get(k) ?? undefined,
  keys: (h: Headers) => [...h.keys()],
};

function spanName(req: { service: { typeName: string }; method: { name: string } }): string {
  return `${req.service.typeName}/${req.method.name}`;
}

/**
 * Client spans for Connect calls, with W3C trace context injected into the
 * request headers (http2 is not auto-instrumented, so we do it here).
 */
export function clientTracingInterceptor(): Interceptor {
  if (!enabled) return passThrough;
  return (next) => async (req) => {
    return await tracer().startActiveSpan(spanName(req), { kind: SpanKind.CLIENT }, async (span) => {
      propagation.inject(context.active(), req.header, headerSetter);
      try {
        return await next(req);
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: ConnectError.from(err).rawMessage });
        throw err;
      } finally {
        span.end();
      }
    });
  };
}

/** Server spans continuing the caller's trace. */
export function serverTracingInterceptor(): Interceptor {
  if (!enabled) return passThrough;
  return (next) => async (req) => {
    const parent = propagation.extract(context.active(), req.header, headerGetter);
    return await context.with(parent, () =>
      tracer().startActiveSpan(spanName(req), { kind: SpanKind.SERVER }, async (span) => {
        try {
          return await next(req);
        } catch (err) {
          span.setStatus({ code: SpanStatusCode.ERROR, message: ConnectError.from(err).rawMessage });
          throw err;
        } finally {
          span.end();
        }
      }),
    );
  };
}
