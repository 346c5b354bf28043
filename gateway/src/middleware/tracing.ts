import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { RequestHandler } from "express";

/**
 * The root span of every public request, continuing a caller's W3C trace
 * context. Internal Connect calls made while handling the request become its
 * children (the kit's client interceptor injects the active context), so one
 * trace covers gateway → service → agent. Installed only when the process traces.
 */
export function tracing(): RequestHandler {
  const tracer = trace.getTracer("dbaas-gateway");
  return (req, res, next) => {
    const parent = propagation.extract(context.active(), req.headers);
    const span = tracer.startSpan(`${req.method} ${req.path}`, { kind: SpanKind.SERVER }, parent);
    res.on("finish", () => {
      span.setAttribute("http.request.method", req.method);
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.locals.requestId) span.setAttribute("dbaas.request_id", String(res.locals.requestId));
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
}
