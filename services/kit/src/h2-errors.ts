import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

const { constants } = http2;
/** RST_STREAM codes that mean something, with connect-node's Code and the name its messages use. */
const resetCodes: Record<number, [Code, string]> = {
  [constants.NGHTTP2_PROTOCOL_ERROR]: [Code.Internal, "PROTOCOL_ERROR"],
  [constants.NGHTTP2_INTERNAL_ERROR]: [Code.Internal, "INTERNAL_ERROR"],
  [constants.NGHTTP2_FLOW_CONTROL_ERROR]: [Code.Internal, "FLOW_CONTROL_ERROR"],
  [constants.NGHTTP2_SETTINGS_TIMEOUT]: [Code.Internal, "SETTINGS_TIMEOUT"],
  [constants.NGHTTP2_FRAME_SIZE_ERROR]: [Code.Internal, "FRAME_SIZE_ERROR"],
  [constants.NGHTTP2_COMPRESSION_ERROR]: [Code.Internal, "COMPRESSION_ERROR"],
  [constants.NGHTTP2_CONNECT_ERROR]: [Code.Internal, "CONNECT_ERROR"],
  [constants.NGHTTP2_REFUSED_STREAM]: [Code.Unavailable, "REFUSED_STREAM"],
  [constants.NGHTTP2_CANCEL]: [Code.Canceled, "CANCEL"],
  [constants.NGHTTP2_ENHANCE_YOUR_CALM]: [Code.ResourceExhausted, "ENHANCE_YOUR_CALM"],
  [constants.NGHTTP2_INADEQUATE_SECURITY]: [Code.PermissionDenied, "INADEQUATE_SECURITY"],
  [constants.NGHTTP2_HTTP_1_1_REQUIRED]: [Code.PermissionDenied, "HTTP_1_1_REQUIRED"],
};

/** The name of an HTTP/2 error code as messages show it, e.g. "INTERNAL_ERROR (0x2)". */
export function h2CodeName(code: number): string {
  const name = code === constants.NGHTTP2_NO_ERROR ? "NO_ERROR" : (resetCodes[code]?.[1] ?? "UNKNOWN");
  return `${name} (0x${code.toString(16)})`;
}

/**
 * Why an HTTP/2 stream closed before its answer, as connect-node's
 * connectErrorFromH2ResetCode words it (client and server side alike);
 * undefined for codes that carry no meaning (NO_ERROR, STREAM_CLOSED).
 */
export function errorFromResetCode(rstCode: number | undefined): ConnectError | undefined {
  const known = rstCode === undefined ? undefined : resetCodes[rstCode];
  if (known === undefined) return undefined;
  const [code, name] = known;
  return new ConnectError(`http/2 stream closed with error code ${name} (0x${rstCode!.toString(16)})`, code);
}

/**
 * The cause of a failed call that provably never reached the server's
 * handler: the request never left this process (no connection, or the
 * session failed before it was sent), the server refused the stream
 * (REFUSED_STREAM), or the server's GOAWAY named a last stream below it.
 * Only such a call is sent again (isSafeToRetry).
 */
export class RequestNotSent extends Error {
  override name = "RequestNotSent";
}

/** An UNAVAILABLE for a call that provably did not reach the handler. */
export function notSentError(message: string, reason?: unknown): ConnectError {
  return new ConnectError(message, Code.Unavailable, undefined, undefined, new RequestNotSent(message, { cause: reason }));
}

/** True when a unary call failed without reaching the server's handler (see RequestNotSent): it may be sent again. */
export function isSafeToRetry(reason: unknown): boolean {
  const err = ConnectError.from(reason);
  return err.code === Code.Unavailable && errorChain(err.cause).some((e) => e instanceof RequestNotSent);
}

/** Node error codes of a connection that could not be made: nothing was sent on it. */
const CONNECT_FAILURES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

/** Node's codes of a session (connection) that failed under a call. */
const SESSION_FAILURES = new Set([
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_INVALID_SESSION",
  "ERR_HTTP2_STREAM_CANCEL",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
]);

/**
 * A failure of connect-node's transport (INTERNAL_RPC_FAST_PATH=0) in the
 * terms of this kit's: a refused stream or a connection never made is
 * UNAVAILABLE marked RequestNotSent; any other failure of the session, or a
 * cancellation the caller did not ask for, is UNAVAILABLE (connect-node
 * reports those as internal, aborted or canceled). Answers from the server
 * are returned as they are.
 */
export function fromStockTransportFailure(reason: unknown, callerCancelled: boolean): unknown {
  if (!(reason instanceof ConnectError)) return reason;
  if (reason.code === Code.Canceled && !callerCancelled) {
    // The caller did not cancel: the server or a dying connection did (connect-node reports the CANCEL reset).
    return new ConnectError(
      `the upstream or the connection cancelled the call: ${reason.rawMessage}`,
      Code.Unavailable,
      undefined,
      undefined,
      reason,
    );
  }
  const chain = errorChain(reason.cause);
  const codes = chain.map((e) => e as { code?: unknown; syscall?: unknown; message: string });
  if (
    reason.rawMessage === `http/2 stream closed with error code ${h2CodeName(constants.NGHTTP2_REFUSED_STREAM)}` ||
    codes.some((e) => e.code === "ERR_HTTP2_STREAM_ERROR" && e.message.endsWith("NGHTTP2_REFUSED_STREAM"))
  ) {
    return notSentError("the upstream refused the stream before processing it (REFUSED_STREAM)", reason);
  }
  if (codes.some((e) => CONNECT_FAILURES.has(String(e.code)) || (e.code === "ETIMEDOUT" && e.syscall === "connect"))) {
    return notSentError(`could not connect to the upstream: ${reason.rawMessage}`, reason);
  }
  if (reason.code !== Code.Unavailable && codes.some((e) => SESSION_FAILURES.has(String(e.code)))) {
    return new ConnectError(`the connection to the upstream failed: ${reason.rawMessage}`, Code.Unavailable, undefined, undefined, reason);
  }
  return reason;
}

/** Node's error codes mapped the way connect-node maps them. */
export function errorFromNodeReason(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const codes = new Set(errorChain(reason).map((e) => (e as { code?: unknown }).code));
  let code = Code.Internal;
  if (["ERR_STREAM_WRITE_AFTER_END", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ECONNRESET"].some((c) => codes.has(c))) {
    code = Code.Aborted;
  } else if (["ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED"].some((c) => codes.has(c))) {
    code = Code.Unavailable;
  }
  const ce = ConnectError.from(reason, code);
  if (ce !== reason) ce.cause = reason;
  return ce;
}

/** `reason` and its causes, outermost first (at most 10, so a cycle cannot loop). */
function errorChain(reason: unknown): Error[] {
  const chain: Error[] = [];
  for (let e = reason; e instanceof Error && chain.length < 10 && !chain.includes(e); e = e.cause) chain.push(e);
  return chain;
}
