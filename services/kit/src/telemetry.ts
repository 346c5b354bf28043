import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { traceDatabaseCalls } from "./db-tracing.ts";

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set, and is a
 * no-op otherwise. Call it first in a service's main. The exporter follows the
 * standard OTEL_* variables (OTLP over HTTP, protobuf unless
 * OTEL_EXPORTER_OTLP_PROTOCOL=http/json). PostgreSQL and Redis calls made
 * within a trace become its spans (db-tracing.ts). Returns a shutdown hook
 * that flushes pending spans.
 */
export async function startTelemetry(serviceName: string): Promise<() => Promise<void>> {
  if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT) return async () => {};
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  const sdk = new NodeSDK({ serviceName, instrumentations: [] });
  sdk.start();
  traceDatabaseCalls();
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

/**
 * The W3C trace context (traceparent, tracestate) of the active span, to store
 * with work that another process picks up later (an instance spec the agent
 * converges); empty outside a trace or when the process does not trace.
 */
export function traceContext(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/**
 * Runs `fn` outside any trace: for work a long-lived stream or loop does on its
 * own account, whose queries would otherwise join whichever span happened to
 * be active when it began.
 */
export function untraced<T>(fn: () => T): T {
  return context.with(ROOT_CONTEXT, fn);
}

/** A piece of work continuing a stored trace context; its span starts with its first step. */
export interface TracedWork {
  /** Runs `fn` as the child span `name` of the work's span. */
  step<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** A zero-length child span marking a milestone (e.g. "instance ready"), when a step ran. */
  mark(name: string): void;
  /** Ends the work's span, as failed when `err` is given; nothing when no step ran. */
  end(err?: unknown): void;
}

/**
 * Work done here on behalf of a request made elsewhere and earlier: `carrier`
 * is the request's `traceContext()`, stored with the work (empty: the work is
 * a trace of its own). Spans exist only for work that takes a step, so
 * checking that nothing needs doing makes none.
 */
export function tracedWork(name: string, carrier: Record<string, string>, attributes: Attributes = {}): TracedWork {
  const parent = propagation.extract(ROOT_CONTEXT, carrier);
  let span: Span | undefined;
  let inside: Context = parent;
  const t = tracer();
  return {
    async step(stepName, fn) {
      if (!span) {
        span = t.startSpan(name, { attributes }, parent);
        inside = trace.setSpan(parent, span);
      }
      return await context.with(inside, () => activeSpan(stepName, attributes, fn));
    },
    mark(markName) {
      if (span) t.startSpan(markName, { attributes }, inside).end();
    },
    end(err) {
      if (!span) return;
      if (err) span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      span.end();
    },
  };
}

/**
 * `fn` as the child span `name` of the active span (a step of a request or of traced work, so that a trace
 * shows where its time goes); without an active span (no trace, or the process does not trace) just `fn`.
 */
export async function inSpan<T>(name: string, fn: () => Promise<T>, attributes: Attributes = {}): Promise<T> {
  if (!trace.getSpan(context.active())) return fn();
  return activeSpan(name, attributes, fn);
}

/** `fn` in a new active span `name` (a child of the active context's), marked failed when it throws. */
function activeSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(name, { attributes }, async (s) => {
    try {
      return await fn();
    } catch (err) {
      s.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      s.end();
    }
  });
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
