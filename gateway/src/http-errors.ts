import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { GatewayContext } from "./context.ts";
import { ApiError, badRequest, rateLimited } from "./errors.ts";
import { createIdSource, SANE_REQUEST_ID } from "./middleware/request-id.ts";
import { securityHeaders } from "./middleware/security-headers.ts";
import { ipWindows, type Decision } from "./rate-limit/limiter.ts";
import "./locals.ts";

/**
 * Requests Node's HTTP server refuses before Express sees them — a parse
 * error (a control character in a header, `HTTP/9.9`, Content-Length with
 * Transfer-Encoding, a bad chunk size, a raw non-ASCII path), headers over the
 * limit, a timed-out request, no Host, an unknown Expect, CONNECT — get the
 * error envelope and the headers every response carries, instead of Node's
 * bare 400/431 with no body and no X-Request-Id.
 */

/** Node's own limit (16 KiB), stated so the message can name it. */
export const MAX_HEADER_BYTES = 16 * 1024;

/** What the client hears about a parse error, by llhttp's (or Node's) error code; the rest is "malformed". */
const PARSE_ERRORS: Record<string, () => ApiError> = {
  HPE_HEADER_OVERFLOW: () => new ApiError(431, "request_header_too_large", `request headers exceed ${MAX_HEADER_BYTES / 1024} KB`),
  HPE_CHUNK_EXTENSIONS_OVERFLOW: () => new ApiError(413, "payload_too_large", "chunk extensions too large"),
  ERR_HTTP_REQUEST_TIMEOUT: () => new ApiError(408, "request_timeout", "the request was not received in time"),
  HPE_INVALID_VERSION: () => badRequest("malformed request line or unsupported HTTP version; use HTTP/1.1"),
  HPE_INVALID_METHOD: () => badRequest("malformed request: invalid method"),
  HPE_INVALID_URL: () => badRequest("malformed request: invalid character in the path (percent-encode it)"),
  HPE_INVALID_CONSTANT: () => badRequest("malformed request line"),
  HPE_INVALID_HEADER_TOKEN: () => badRequest("malformed request: invalid character in a header"),
  HPE_INVALID_TRANSFER_ENCODING: () => badRequest("malformed request: invalid Transfer-Encoding, or Transfer-Encoding with Content-Length"),
  HPE_INVALID_CONTENT_LENGTH: () => badRequest("malformed request: invalid Content-Length"),
  HPE_UNEXPECTED_CONTENT_LENGTH: () => badRequest("malformed request: duplicate or unexpected Content-Length"),
  HPE_INVALID_CHUNK_SIZE: () => badRequest("malformed request body: invalid chunk size"),
  HPE_PAUSED_H2_UPGRADE: () => badRequest("HTTP/2 without TLS is not served here; use HTTP/1.1"),
};

/** The error for a `clientError`, or undefined when it is no fault of the request (a reset socket). */
export function clientErrorOf(err: NodeJS.ErrnoException): ApiError | undefined {
  const code = err.code ?? "";
  const known = PARSE_ERRORS[code];
  if (known) return known();
  return code.startsWith("HPE_") ? badRequest("malformed HTTP request") : undefined;
}

/** Builds the answer for `err` the way the app's response writer would, as header pairs and body. */
function envelope(err: ApiError, fixed: string[], requestId: string, rateLimit: Decision | undefined) {
  const body = JSON.stringify({
    error: { code: err.code, message: err.message, details: err.details },
    meta: { request_id: requestId },
  });
  const headers = [...fixed, "X-Request-Id", requestId];
  if (rateLimit !== undefined) {
    headers.push("X-RateLimit-Limit", String(rateLimit.limit), "X-RateLimit-Remaining", String(rateLimit.remaining));
    headers.push("X-RateLimit-Reset", String(rateLimit.reset));
  }
  for (const [name, value] of Object.entries(err.headers)) headers.push(name, value);
  headers.push("Content-Type", "application/json; charset=utf-8", "Content-Length", String(Buffer.byteLength(body)));
  headers.push("Connection", "close");
  return { headers, body };
}

type InFlight = ServerResponse & { locals?: Partial<Express.Locals>; req?: IncomingMessage };

/** The response the socket is busy with when the error comes (the app took its request on), if any. */
function inFlight(socket: Socket): InFlight | undefined {
  return (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage ?? undefined;
}

/** Answers Node raises itself, each in the envelope; installed by `createGatewayServer` (server.ts). */
export interface MalformedAnswers {
  /** Server `clientError`: a request Node could not parse, headers too large, a timeout. */
  clientError(err: NodeJS.ErrnoException, socket: Socket): void;
  /** Server `checkExpectation`: an Expect other than 100-continue (Node: a bare 417). */
  checkExpectation(req: IncomingMessage, res: ServerResponse): void;
  /** Server `connect`: this is not a proxy (Node: the connection dropped without a word). */
  connect(req: IncomingMessage, socket: Socket): void;
  /** For the request listener: answers an HTTP/1.1 request without Host (RFC 9112 §3.2) and says so. */
  hostMissing(req: IncomingMessage, res: ServerResponse): boolean;
}

/** How long a socket we answered and ended may still receive (and drop) what the client was sending. */
const LINGER_MS = 2_000;

/**
 * Ends `socket` after `response` without making the client lose it: closing
 * while the client is still sending would reset the connection, and a reset
 * can discard the response before the client reads it. So the socket is
 * half-closed, whatever still arrives is dropped, and it is destroyed when the
 * client closes its side or after LINGER_MS.
 */
function endAndLinger(socket: Socket, response: string): void {
  socket.end(response);
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}

function rawResponse(status: number, headers: string[], body: string | undefined): string {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\nDate: ${new Date().toUTCString()}\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${head}\r\n${body ?? ""}`;
}

/**
 * A request that was never counted is counted against the client IP, as the
 * app counts requests it refuses, so the answer carries X-RateLimit-* (and is
 * a 429 past the limit) — except behind proxies, where the socket's peer is
 * not the client and the request stays uncounted.
 */
export function createMalformedAnswers(ctx: GatewayContext): MalformedAnswers {
  const fixed = securityHeaders(ctx.config.publicBaseUrl);
  const newId = createIdSource();
  const answered = new WeakSet<Socket>();

  /** The error to send (a 429 when the IP is over its limit) and the decision for X-RateLimit-*. */
  const decide = async (socket: Socket, err: ApiError, counted?: Decision) => {
    if (counted !== undefined) return { error: err, rateLimit: counted };
    const ip = socket.remoteAddress;
    if (ctx.config.trustProxyHops > 0 || ip === undefined) return { error: err, rateLimit: undefined };
    try {
      const windows = ipWindows(ctx.config.ipLimitPerMinute, ctx.config.ipLimitPerDay);
      const decision = await ctx.limiter.consume(`ip:${ip}`, windows);
      return { error: decision.allowed ? err : rateLimited(decision.retryAfter), rateLimit: decision };
    } catch (limitErr) {
      ctx.log.error("rate limiter failed", { error: limitErr });
      return { error: err, rateLimit: undefined };
    }
  };

  /** Answers on a request Node parsed but will not hand to the app. */
  const answer = (req: IncomingMessage, res: ServerResponse, err: ApiError) => {
    void decide(req.socket, err).then(({ error, rateLimit }) => {
      const supplied = req.headers["x-request-id"];
      const requestId = typeof supplied === "string" && SANE_REQUEST_ID.test(supplied) ? supplied : newId();
      const { headers, body } = envelope(error, fixed, requestId, rateLimit);
      res.writeHead(error.status, headers);
      res.end(req.method === "HEAD" ? undefined : body);
    });
  };

  /** Writes the answer to `err` on a socket Node gave up on, as the answer to `res`'s request when there is one. */
  const reply = (socket: Socket, err: ApiError, res: InFlight | undefined) => {
    void decide(socket, err, res?.locals?.rateLimit).then(({ error, rateLimit }) => {
      // The client may have gone meanwhile, or that request's handler answered after all.
      if (!socket.writable || res?.headersSent) {
        socket.destroy();
        return;
      }
      const { headers, body } = envelope(error, fixed, res?.locals?.requestId ?? newId(), rateLimit);
      endAndLinger(socket, rawResponse(error.status, headers, res?.req?.method === "HEAD" ? undefined : body));
    });
  };

  return {
    clientError(raw, socket) {
      // A socket whose parser failed reports the same error again for every further chunk it receives.
      if (answered.has(socket)) return;
      answered.add(socket);
      const err = clientErrorOf(raw);
      if (err === undefined || !socket.writable) {
        socket.destroy();
        return;
      }
      // From here the socket is ours. A client that half-closes after its request (which does not mean it
      // wants no answer) would otherwise have Node's HTTP end-of-input handler end the socket before the
      // answer is decided. Server sockets allow half-open, so net's own 'end' listener does nothing.
      socket.removeAllListeners("end");
      const res = inFlight(socket);
      if (res?.req?.complete) {
        // The error is in a request pipelined behind one the app is still answering: that answer goes first.
        res.once("close", () => (socket.writable ? reply(socket, err, undefined) : socket.destroy()));
        return;
      }
      // Else the error is in the body of the request being read (a bad chunk), if any: answered as that one.
      if (res?.headersSent) {
        socket.destroy();
        return;
      }
      reply(socket, err, res);
    },
    checkExpectation(req, res) {
      answer(req, res, new ApiError(417, "validation_error", "unsupported Expect header: only 100-continue is"));
    },
    connect(_req, socket) {
      reply(socket, badRequest("CONNECT is not supported: this is an API, not a proxy"), undefined);
    },
    hostMissing(req, res) {
      if (req.httpVersionMajor !== 1 || req.httpVersionMinor !== 1 || req.headers.host !== undefined) return false;
      answer(req, res, badRequest("malformed request: HTTP/1.1 requires a Host header"));
      return true;
    },
  };
}
