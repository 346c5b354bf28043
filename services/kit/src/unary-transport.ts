import http2 from "node:http2";
import { create, fromBinary, isMessage, toBinary, type DescMessage, type DescMethodUnary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type Interceptor,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { abandonStream, requestFailure, sessionState, streamFailure, type StreamOutcome } from "./h2-sessions.ts";
import { contentTypeUnaryProto, errorFromJsonBytes, requestHeader, validateResponse } from "@connectrpc/connect/protocol-connect";

/** What a unary response may weigh before the call is abandoned (connect-node's default is unlimited). */
export const UNARY_READ_MAX_BYTES = 16 * 1024 * 1024;

export interface UnaryTransportOptions {
  baseUrl: string;
  /** The connection this transport shares with `streams`: one HTTP/2 session per upstream. */
  sessionManager: Http2SessionManager;
  /** Carries streaming calls (connect-node's own transport on the same session). */
  streams: Transport;
  interceptors: Interceptor[];
}

/**
 * A Connect transport for what internal calls overwhelmingly are: unary,
 * binary, on one long-lived HTTP/2 session. The bytes on the wire are the
 * Connect protocol exactly as connect-node writes them (request headers and
 * error decoding come from connect's own protocol module), and interceptors
 * run as connect runs them. What it leaves out is connect-node's generic
 * machinery — async-iterable bodies, a linked AbortController per call that is
 * aborted (a DOMException) when every call ends — which costs more CPU than
 * the call itself at gateway rates. Streaming calls go to `streams`.
 *
 * Kept by hand for measured speed: `npm run bench:gateway` (docs/benchmarks.md,
 * "Second session"); `INTERNAL_RPC_FAST_PATH=0` switches to connect-node's own.
 */
export function createUnaryTransport(opts: UnaryTransportOptions): Transport {
  const { sessionManager, streams, interceptors } = opts;
  const base = opts.baseUrl.replace(/\/$/, "");
  return {
    stream: (...args) => streams.stream(...args),
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: ConstructorParameters<typeof Headers>[0],
      input: unknown,
      contextValues?: ReturnType<typeof createContextValues>,
    ): Promise<UnaryResponse<I, O>> {
      const deadline = timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
      const path = `/${method.parent.typeName}/${method.name}`;
      const req: UnaryRequest<I, O> = {
        stream: false,
        service: method.parent,
        method,
        requestMethod: "POST",
        url: base + path,
        header: requestHeader("unary", true, undefined, header, true),
        contextValues: contextValues ?? createContextValues(),
        message: (isMessage(input, method.input) ? input : create(method.input, input as never)) as UnaryRequest<I, O>["message"],
        signal: signal ?? neverAborted,
      };
      const send = (r: UnaryRequest<I, O>) => exchange(sessionManager, path, r, deadline);
      const next = interceptors.reduceRight<(r: UnaryRequest<I, O>) => Promise<UnaryResponse<I, O>>>(
        (n, interceptor) => interceptor(n as never) as never,
        send,
      );
      return await next(req);
    },
  };
}

const neverAborted = new AbortController().signal;

/** One request/response exchange on a stream of the shared session. */
async function exchange<I extends DescMessage, O extends DescMessage>(
  sessionManager: Http2SessionManager,
  path: string,
  req: UnaryRequest<I, O>,
  deadline: number | undefined,
): Promise<UnaryResponse<I, O>> {
  const remaining = deadline === undefined ? undefined : deadline - Date.now();
  if (remaining !== undefined && remaining <= 0) throw new ConnectError("the operation timed out", Code.DeadlineExceeded);
  if (req.signal.aborted) throw ConnectError.from(req.signal.reason, Code.Canceled);
  const headers: http2.OutgoingHttpHeaders = {};
  req.header.forEach((value, key) => {
    headers[key] = value;
  });
  if (remaining !== undefined) headers["connect-timeout-ms"] = String(remaining);
  const body = toBinary(req.method.input, req.message);
  const stream = await openStream(sessionManager, path, headers, remaining, req.signal);
  const session = stream.session as http2.ClientHttp2Session;
  const outcome: StreamOutcome = { stream, session, state: sessionState(session), frameError: false };
  return await new Promise<UnaryResponse<I, O>>((resolve, reject) => {
    let status = 0;
    let responseHeaders: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let ended = false;
    const settle = (err: ConnectError | undefined, res?: UnaryResponse<I, O>) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      if (cancellable) req.signal.removeEventListener("abort", onAbort);
      if (err) {
        // An answer that arrived in full needs no reset: sending one anyway is what drained the server's reset budget.
        if (!ended) abandonStream(stream, outcome.state);
        reject(err);
      } else resolve(res!);
    };
    const onAbort = () => settle(ConnectError.from(req.signal.reason, Code.Canceled));
    // The shared never-aborted signal of calls without one gets no listeners.
    const cancellable = req.signal !== neverAborted;
    if (cancellable) req.signal.addEventListener("abort", onAbort);
    const timer =
      remaining === undefined
        ? undefined
        : setTimeout(() => settle(new ConnectError("the operation timed out", Code.DeadlineExceeded)), remaining);
    stream.on("response", (h) => {
      status = Number(h[":status"] ?? 0);
      responseHeaders = h;
    });
    stream.on("data", (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > UNARY_READ_MAX_BYTES) {
        settle(new ConnectError(`message size is larger than configured readMaxBytes ${UNARY_READ_MAX_BYTES}`, Code.ResourceExhausted));
        return;
      }
      chunks.push(chunk);
      sessionManager.notifyResponseByteRead(stream);
    });
    stream.on("end", () => {
      ended = true;
      if (settled) return;
      // A stream torn down (its session lost) ends too: only a clean end carries a whole answer; 'close' tells the rest.
      if (!endedCleanly(stream, status, responseHeaders, size)) return;
      try {
        settle(undefined, decodeResponse(req, status, responseHeaders, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
      } catch (err) {
        settle(ConnectError.from(err));
      }
    });
    stream.on("frameError", () => (outcome.frameError = true));
    stream.on("error", (err) => {
      if (!settled) settle(streamFailure(outcome, err));
    });
    stream.on("close", () => {
      // Also fires after every normal end: only build an error when it means one.
      if (!settled) settle(streamFailure(outcome));
    });
    // The signal may have been aborted while the stream was being opened.
    if (req.signal.aborted) onAbort();
    else stream.end(body);
  });
}

/**
 * A stream of the shared session, waited for no longer than the call's
 * deadline and its signal allow: the manager may first dial, or verify an
 * idle session with a PING, and no wait of a call is left unbounded (issue
 * #26: such a wait once never ended). A stream that arrives after the call
 * gave up is cancelled unused.
 */
async function openStream(
  sessionManager: Http2SessionManager,
  path: string,
  headers: http2.OutgoingHttpHeaders,
  remaining: number | undefined,
  signal: AbortSignal,
): Promise<http2.ClientHttp2Stream> {
  const opening = sessionManager.request("POST", path, headers, {}).catch((err: unknown) => {
    throw requestFailure(err);
  });
  if (remaining === undefined && signal === neverAborted) return await opening;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const givenUp = new Promise<never>((_, reject) => {
    if (remaining !== undefined) {
      timer = setTimeout(
        () => reject(new ConnectError("the operation timed out (waiting for a connection)", Code.DeadlineExceeded)),
        remaining,
      );
    }
    if (signal !== neverAborted) {
      onAbort = () => reject(ConnectError.from(signal.reason, Code.Canceled));
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
  try {
    return await Promise.race([opening, givenUp]);
  } catch (err) {
    opening.then(
      (late) => abandonStream(late, sessionState(late.session as http2.ClientHttp2Session)),
      () => {},
    );
    throw err;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

/**
 * True when the stream's end is the server's END_STREAM after an answer:
 * response headers arrived, the stream was not reset (Node also ends a stream
 * it destroys) and the body has the length the server declared.
 */
function endedCleanly(stream: http2.ClientHttp2Stream, status: number, headers: http2.IncomingHttpHeaders, size: number): boolean {
  if (status === 0) return false;
  if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) return false;
  const declared = headers["content-length"];
  return declared === undefined || Number(declared) === size;
}

/** Copies Node's response headers into `header`, pseudo-headers dropped and `trailer-*` (unprefixed) into `trailer`. */
function toHeaders(nodeHeaders: http2.IncomingHttpHeaders, header: Headers, trailer: Headers): void {
  for (const key in nodeHeaders) {
    if (key.startsWith(":")) continue;
    const value = nodeHeaders[key];
    const [target, name] = key.startsWith("trailer-") ? [trailer, key.slice(8)] : [header, key];
    if (Array.isArray(value)) for (const v of value) target.append(name, v);
    else if (value !== undefined) target.set(name, String(value));
  }
}

/**
 * Turns the HTTP response into connect's UnaryResponse. The common answer
 * (200, application/proto, no encoding) is read directly; anything else goes
 * through connect's own validation and error decoding.
 */
function decodeResponse<I extends DescMessage, O extends DescMessage>(
  req: UnaryRequest<I, O>,
  status: number,
  nodeHeaders: http2.IncomingHttpHeaders,
  body: Uint8Array,
): UnaryResponse<I, O> {
  const encoding = nodeHeaders["content-encoding"];
  const plain = encoding === undefined || encoding.toLowerCase() === "identity";
  if (!(status === 200 && plain && nodeHeaders["content-type"] === contentTypeUnaryProto)) {
    // An error's metadata is its headers and trailers together, as connect-node reports them.
    const all = new Headers();
    toHeaders(nodeHeaders, all, all);
    if (!plain) throw new ConnectError(`unsupported response encoding "${encoding}"`, Code.Internal, all);
    const { isUnaryError, unaryError } = validateResponse("unary", true, status, all);
    if (isUnaryError) throw errorFromJsonBytes(body, all, unaryError!);
  }
  const header = new Headers();
  const trailer = new Headers();
  toHeaders(nodeHeaders, header, trailer);
  return {
    stream: false,
    service: req.service,
    method: req.method,
    header,
    message: fromBinary(req.method.output, body) as UnaryResponse<I, O>["message"],
    trailer,
  };
}
