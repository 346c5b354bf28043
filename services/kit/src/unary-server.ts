import http2 from "node:http2";
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  createMethodImplSpec,
  createServiceImplSpec,
  type ConnectRouter,
  type HandlerContext,
  type Interceptor,
  type MethodImpl,
  type MethodImplSpec,
  type ServiceImpl,
} from "@connectrpc/connect";
import {
  compressionNegotiate,
  createMethodSerializationLookup,
  createMethodUrl,
  getAbortSignalReason,
  invokeUnaryImplementation,
  validateUniversalHandlerOptions,
  type Compression,
  type MethodSerializationLookup,
  type UniversalHandler,
  type UniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  contentTypeUnaryJson,
  contentTypeUnaryProto,
  errorToJsonBytes,
  headerContentType,
  headerUnaryAcceptEncoding,
  headerUnaryContentLength,
  headerUnaryEncoding,
  parseTimeout,
  trailerMux,
} from "@connectrpc/connect/protocol-connect";
import { errorFromResetCode } from "./h2-errors.ts";

/**
 * Kept by hand for measured speed: `npm run bench:internal` measured server CPU
 * per call 453–497 µs with connect-node, 164–209 µs here (docs/benchmarks.md);
 * `INTERNAL_RPC_FAST_PATH=0` serves connect-node's path instead.
 *
 * The common case of an internal call, served straight from the HTTP/2 stream:
 * a unary call in the Connect protocol, binary, uncompressed. Everything else
 * (gRPC, gRPC-Web, JSON, GET, streams, compressed requests, unknown paths) is
 * left to connect-node.
 *
 * connect-node answers these calls through generic machinery whose cost
 * exceeds the call's own at our rates: http2 compat request/response objects,
 * async iterables for the body, Headers conversions, and two AbortControllers
 * aborted (a DOMException each) when every call ends. Here the protocol
 * details still come from connect (timeout parsing, serialization limits,
 * interceptors and implementation invocation, error JSON, trailer muxing,
 * compression negotiation), so the bytes on the wire are connect-node's; what
 * is left out is the plumbing. One deliberate difference: `ctx.signal` aborts
 * when the call is cancelled, times out, fails or the server shuts down, but
 * not when it completes successfully.
 */
export interface UnaryFastPathOptions {
  /** Run in this order around every implementation, as connect-node runs them. */
  interceptors: Interceptor[];
  shutdownSignal: AbortSignal;
  /** Response compressions offered, in the adapter's order of preference. */
  acceptCompression: Compression[];
  readMaxBytes?: number;
  /** Told when answering a call failed outside its handler (the caller then gets an internal error); default console.error. */
  onAnswerFailed?: (message: string, reason: unknown) => void;
}

export interface UnaryFastPath {
  /** Wraps `routes` so that the unary methods it registers are served here too. */
  record(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void;
  /** Serves the stream if it is a call this path takes; false leaves it untouched for connect-node. */
  serve(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean;
}

type UnarySpec = MethodImplSpec & { kind: "unary" };

interface UnaryMethod {
  spec: UnarySpec;
  serialization: MethodSerializationLookup<DescMessage, DescMessage>;
}

type Limits = ReturnType<typeof validateUniversalHandlerOptions>;

export function createUnaryFastPath(options: UnaryFastPathOptions): UnaryFastPath {
  const limits = validateUniversalHandlerOptions({
    interceptors: options.interceptors,
    shutdownSignal: options.shutdownSignal,
    acceptCompression: options.acceptCompression,
    readMaxBytes: options.readMaxBytes,
  });
  const methods = new Map<string, UnaryMethod>();
  const inFlight = new Set<AbortController>();
  options.shutdownSignal.addEventListener("abort", () => {
    for (const controller of inFlight) controller.abort(getAbortSignalReason(options.shutdownSignal));
  });
  return {
    record: (routes) => (router) => routes(new RecordingRouter(router, methods, limits)),
    serve(stream, headers) {
      const method = headers[":method"] === "POST" ? methods.get(headers[":path"] ?? "") : undefined;
      if (method === undefined || !isPlainConnectUnary(headers)) return false;
      // The outcome is read from 'close'; without a listener an errored stream would crash the process.
      stream.on("error", ignoreStreamError);
      answer(stream, headers, method, limits, inFlight).catch((reason: unknown) => {
        const message = `answering rpc ${method.spec.method.name} of ${method.spec.method.parent.typeName} failed`;
        (options.onAnswerFailed ?? console.error)(message, reason);
        answerInternalError(stream);
      });
      return true;
    },
  };
}

/**
 * Binary, uncompressed, protocol version 1 (or unnamed, as connect-node
 * accepts by default), nothing asking for HTTP semantics we do not implement.
 */
function isPlainConnectUnary(headers: http2.IncomingHttpHeaders): boolean {
  const version = headers["connect-protocol-version"];
  return (
    headers["content-type"] === contentTypeUnaryProto &&
    headers["content-encoding"] === undefined &&
    (version === undefined || version === "1") &&
    headers.expect === undefined &&
    headers[":authority"] !== undefined
  );
}

/**
 * A ConnectRouter that registers everything on the adapter's router and also
 * keeps the unary implementations for the fast path. Methods registered with
 * their own handler options stay with connect-node alone.
 */
class RecordingRouter implements ConnectRouter {
  constructor(
    private readonly router: ConnectRouter,
    private readonly methods: Map<string, UnaryMethod>,
    private readonly limits: Limits,
  ) {}

  get handlers(): UniversalHandler[] {
    return this.router.handlers;
  }

  service<T extends DescService>(service: T, impl: Partial<ServiceImpl<T>>, options?: Partial<UniversalHandlerOptions>): this {
    this.router.service(service, impl, options);
    for (const spec of Object.values(createServiceImplSpec(service, impl).methods)) this.keep(spec, options);
    return this;
  }

  rpc<M extends DescMethod>(method: M, impl: MethodImpl<M>, options?: Partial<UniversalHandlerOptions>): this {
    this.router.rpc(method, impl, options);
    this.keep(createMethodImplSpec(method, impl), options);
    return this;
  }

  private keep(spec: MethodImplSpec, options: Partial<UniversalHandlerOptions> | undefined): void {
    const path = createMethodUrl("/", spec.method);
    if (spec.kind !== "unary" || options !== undefined) {
      this.methods.delete(path);
      return;
    }
    this.methods.set(path, { spec, serialization: createMethodSerializationLookup(spec.method, undefined, undefined, this.limits) });
  }
}

/** Runs one call and writes its answer exactly as connect's Connect unary handler would. */
async function answer(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  method: UnaryMethod,
  limits: Limits,
  inFlight: Set<AbortController>,
): Promise<void> {
  const controller = new AbortController();
  let answered = false;
  stream.once("close", () => {
    if (!answered) controller.abort(errorFromResetCode(stream.rstCode));
  });
  if (limits.shutdownSignal?.aborted) controller.abort(getAbortSignalReason(limits.shutdownSignal));
  inFlight.add(controller);
  const timeout = parseTimeout(single(headers["connect-timeout-ms"]), limits.maxTimeoutMs);
  const deadline = armDeadline(controller, timeout.timeoutMs);
  const responseHeader = new Headers({ [headerContentType]: contentTypeUnaryProto });
  const responseTrailer = new Headers();
  let status = 200;
  let body: Uint8Array;
  try {
    // Inside the try: odd request headers (an :authority URL cannot parse) are an error answer, not a reset.
    const ctx = handlerContext(headers, method.spec, controller.signal, timeout.timeoutMs, responseHeader, responseTrailer);
    if (timeout.error) throw timeout.error;
    const input = method.serialization.getI(true).parse(await readBody(stream, limits.readMaxBytes, headers["content-length"]));
    const running = invokeUnaryImplementation(method.spec, ctx, input, limits.interceptors);
    // The caller's deadline ends the call whether or not the handler heeds its signal: the answer goes out now.
    if (deadline !== undefined) running.catch(() => {});
    const output = deadline === undefined ? await running : await Promise.race([running, expiry(controller.signal)]);
    body = method.serialization.getO(true).serialize(output);
  } catch (e) {
    controller.abort(e);
    const error = e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
    status = codeToHttpStatus(error.code);
    responseHeader.set(headerContentType, contentTypeUnaryJson);
    error.metadata.forEach((value, key) => {
      responseHeader.set(key, value);
    });
    body = errorToJsonBytes(error, limits.jsonOptions);
  } finally {
    if (deadline) clearTimeout(deadline);
    inFlight.delete(controller);
  }
  if (body.byteLength >= limits.compressMinBytes) {
    const compression = compressionNegotiate(
      limits.acceptCompression,
      null,
      single(headers["accept-encoding"]),
      headerUnaryAcceptEncoding,
    ).response;
    if (compression) {
      body = await compression.compress(body);
      responseHeader.set(headerUnaryEncoding, compression.name);
    }
  }
  const header = trailerMux(responseHeader, responseTrailer);
  header.set(headerUnaryContentLength, body.byteLength.toString(10));
  answered = true;
  if (stream.destroyed || stream.closed) return;
  stream.respond(nodeHeaders(status, header));
  stream.end(body);
}

/**
 * The context connect's createHandlerContext would build, without its
 * deadline and linked AbortControllers: `signal` is the call's own.
 */
function handlerContext(
  headers: http2.IncomingHttpHeaders,
  spec: UnarySpec,
  signal: AbortSignal,
  timeoutMs: number | undefined,
  responseHeader: Headers,
  responseTrailer: Headers,
): HandlerContext {
  const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  const path = headers[":path"]!;
  return {
    method: spec.method,
    service: spec.method.parent,
    signal,
    timeoutMs: () => (deadline === undefined ? undefined : deadline - Date.now()),
    requestMethod: "POST",
    requestHeader: webHeaders(headers),
    responseHeader,
    responseTrailer,
    protocolName: "connect",
    values: createContextValues(),
    url: new URL(path, `http://${headers[":authority"]}`).toString(),
  };
}

/**
 * Rejects with the deadline's error once the call's signal is aborted by it;
 * a handler still running then has its result dropped.
 */
function expiry(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const expired = () => {
      const reason: unknown = signal.reason;
      if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) reject(reason);
    };
    if (signal.aborted) expired();
    else signal.addEventListener("abort", expired, { once: true });
  });
}

/** Aborts with connect's deadline error when the caller's timeout passes. */
function armDeadline(controller: AbortController, timeoutMs: number | undefined): NodeJS.Timeout | undefined {
  if (timeoutMs === undefined) return undefined;
  const expire = () => controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  if (timeoutMs <= 0) {
    expire();
    return undefined;
  }
  return setTimeout(expire, timeoutMs);
}

/**
 * The request body, with connect's limits and messages: a declared length
 * over the limit is refused before anything is read, a body that differs from
 * its declared length is a protocol error.
 */
function readBody(stream: http2.ServerHttp2Stream, readMaxBytes: number, contentLength: string | undefined): Promise<Uint8Array> {
  const declared = contentLength === undefined ? NaN : parseInt(contentLength, 10);
  const known = Number.isSafeInteger(declared) && declared >= 0;
  if (known && declared > readMaxBytes) {
    return Promise.reject(
      new ConnectError(`message size ${declared} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted),
    );
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (known && size > declared) {
        fail(new ConnectError(`protocol error: promised ${declared} bytes, received ${size}`, Code.InvalidArgument));
      } else if (!known && size > readMaxBytes) {
        fail(new ConnectError(`message size is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted));
      } else {
        chunks.push(chunk);
      }
    };
    const onEnd = () => {
      stream.off("data", onData);
      stream.off("close", onClose);
      if (known && size < declared) {
        reject(new ConnectError(`protocol error: promised ${declared} bytes, received ${size}`, Code.InvalidArgument));
      } else {
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      }
    };
    const onClose = () => fail(errorFromResetCode(stream.rstCode) ?? new ConnectError("request body cut short", Code.Aborted));
    const fail = (err: ConnectError) => {
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("close", onClose);
      reject(err);
    };
    stream.on("data", onData);
    stream.once("end", onEnd);
    stream.once("close", onClose);
  });
}

/** Request headers as connect-node's nodeHeaderToWebHeader builds them (pseudo-headers left out). */
function webHeaders(headers: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const key in headers) {
    if (key.charCodeAt(0) === 58 /* ":" */) continue;
    const value = headers[key];
    if (typeof value === "string") out.append(key, value);
    else if (Array.isArray(value)) for (const v of value) out.append(key, v);
  }
  return out;
}

/** Response headers as connect-node's webHeaderToNodeHeaders writes them. */
function nodeHeaders(status: number, header: Headers): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = { ":status": status };
  header.forEach((value, key) => {
    const existing = out[key];
    if (existing === undefined) out[key] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[key] = [String(existing), value];
  });
  return out;
}

function single(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
}

function ignoreStreamError(): void {}

/**
 * The answer when writing the real one failed (e.g. a handler left a header
 * value HTTP/2 refuses): internal, as connect-node answers an unexpected
 * exception, rather than a reset the caller cannot tell from a broken
 * connection. A stream that has already answered or gone is only closed.
 */
function answerInternalError(stream: http2.ServerHttp2Stream): void {
  if (stream.destroyed || stream.closed) return;
  try {
    if (!stream.headersSent) {
      const body = errorToJsonBytes(new ConnectError("internal error", Code.Internal), {});
      stream.respond({ ":status": 500, [headerContentType]: contentTypeUnaryJson, [headerUnaryContentLength]: String(body.byteLength) });
      stream.end(body);
      return;
    }
  } catch {
    // Fall through to the reset.
  }
  stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
}
