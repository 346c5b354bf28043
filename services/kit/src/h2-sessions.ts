import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { Http2SessionManager } from "@connectrpc/connect-node";
import { errorFromNodeReason, errorFromResetCode, h2CodeName, notSentError } from "./h2-errors.ts";

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants;

/**
 * Resets (RST_STREAM) one client session may send: a burst of 500, then 20 a
 * second. Servers built on nghttp2 (Node's among them) answer more than 1000
 * resets, then more than 33 a second, with GOAWAY(INTERNAL_ERROR), which
 * fails every call in flight on the session (CVE-2023-44487's mitigation,
 * fixed at those numbers in Node 20). Half of it leaves room for
 * connect-node's streams on the same session.
 */
export const RESET_BURST = 500;
export const RESETS_PER_SECOND = 20;

/** A token bucket of resets, refilled per elapsed second as nghttp2 refills its own. */
export class ResetBudget {
  private tokens: number;
  private second: number;

  constructor(
    private readonly burst = RESET_BURST,
    private readonly rate = RESETS_PER_SECOND,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.second = Math.floor(now() / 1000);
  }

  /** Takes one reset if the budget has one. */
  take(): boolean {
    const second = Math.floor(this.now() / 1000);
    if (second > this.second) {
      this.tokens = Math.min(this.burst, this.tokens + (second - this.second) * this.rate);
      this.second = second;
    }
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** Keepalive PINGs on a session with calls in flight, and the idle time after which a session is verified before use. */
export const PING_INTERVAL_MS = 10_000;

/** The parts of connect-node's session manager (2.1.2, pinned exactly) that settleVerifyOnClose mends. */
interface ReadyState {
  conn: http2.ClientHttp2Session;
  verify(): Promise<boolean>;
}
interface ManagerInternals {
  verify(state: ReadyState): Promise<void>;
}

/**
 * connect-node's Http2SessionManager, with its verification mended. Before a
 * request on a session idle for longer than the ping interval the manager
 * sends a PING and waits for it; that wait settles on the PING's answer or
 * on the session's 'error', and not when the session just closes — which is
 * what it does when the peer dies (SIGKILL: the kernel sends FIN) while the
 * PING is in flight, and the close also clears the PING's own timeout. The
 * manager keeps that never-settled promise as "the" verification: the
 * request waiting on it hangs, and so does every later request that finds
 * its session idle, for the life of the process (issue #26; upstream
 * connect-es#1746, not released in 2.1.2). Here a close settles it as a
 * failed verification, as upstream now does, so the manager dials a new
 * session.
 */
export function createSessionManager(baseUrl: string, pingIntervalMs = PING_INTERVAL_MS, localAddress?: string): Http2SessionManager {
  // A cleartext session's options reach net.connect: localAddress binds its source address.
  const manager = new Http2SessionManager(
    baseUrl,
    { pingIntervalMs },
    localAddress ? ({ localAddress } as http2.ClientSessionOptions) : undefined,
  );
  const internals = manager as unknown as ManagerInternals;
  const verify = internals.verify;
  if (typeof verify !== "function")
    throw new Error("connect-node's Http2SessionManager has no verify(): re-check h2-sessions.ts after an upgrade");
  internals.verify = function (this: ManagerInternals, state: ReadyState) {
    settleVerifyOnClose(state);
    return verify.call(this, state);
  };
  return manager;
}

const mended = new WeakSet<ReadyState>();

function settleVerifyOnClose(state: ReadyState): void {
  if (mended.has(state)) return;
  mended.add(state);
  const verify = state.verify;
  state.verify = () =>
    new Promise<boolean>((resolve) => {
      const { conn } = state;
      if (conn.closed || conn.destroyed) {
        resolve(false);
        return;
      }
      const onClose = () => resolve(false);
      conn.once("close", onClose);
      void verify.call(state).then((alive) => {
        conn.off("close", onClose);
        resolve(alive);
      });
    });
}

/** What the unary transport knows about one client session. */
export interface ClientSessionState {
  /** The server's GOAWAY, once one arrived: streams above lastStreamId never reached it. */
  goaway?: { code: number; lastStreamId: number };
  resets: ResetBudget;
}

const states = new WeakMap<http2.ClientHttp2Session, ClientSessionState>();

/**
 * The state of `session`, set up on its first stream. It also gives every
 * session an 'error' listener for good: connect-node's session manager drops
 * its own when it moves on from a session that is still closing, and an
 * 'error' without a listener would end the process.
 */
export function sessionState(session: http2.ClientHttp2Session): ClientSessionState {
  let state = states.get(session);
  if (state === undefined) {
    const created: ClientSessionState = { resets: new ResetBudget() };
    session.on("goaway", (code: number, lastStreamId: number) => {
      created.goaway = { code, lastStreamId: Math.min(lastStreamId, created.goaway?.lastStreamId ?? lastStreamId) };
    });
    session.on("error", ignoreSessionError);
    states.set(session, created);
    state = created;
  }
  return state;
}

function ignoreSessionError(): void {}

/**
 * Gives up on a stream whose answer is no longer wanted. A stream that already
 * closed is left alone: a reset after the answer would only spend the peer's
 * patience. Within the budget the stream is cancelled; beyond it the answer is
 * read and dropped (the server's own deadline or its answer ends the stream).
 */
export function abandonStream(stream: http2.ClientHttp2Stream, state: ClientSessionState): void {
  if (stream.closed || stream.destroyed) return;
  if (state.resets.take()) stream.close(NGHTTP2_CANCEL);
  else stream.resume();
}

/**
 * Why `sessionManager.request()` gave no stream. Nothing was sent, so this is
 * UNAVAILABLE and safe to retry, unless the request itself cannot be sent
 * (e.g. an invalid header), which no retry mends.
 */
export function requestFailure(reason: unknown): ConnectError {
  const code = (reason as { code?: unknown }).code;
  const invalidRequest =
    reason instanceof TypeError ||
    (typeof code === "string" &&
      /^ERR_(INVALID_CHAR|INVALID_HTTP_TOKEN|HTTP2_INVALID_HEADER|HTTP2_HEADER|HTTP2_INVALID_PSEUDOHEADER|HTTP2_INVALID_CONNECTION_HEADERS)/.test(
        code,
      ));
  if (invalidRequest) return errorFromNodeReason(reason);
  return notSentError(`could not reach the upstream: ${ConnectError.from(reason).rawMessage}`, reason);
}

export interface StreamOutcome {
  stream: http2.ClientHttp2Stream;
  session: http2.ClientHttp2Session;
  state: ClientSessionState;
  /** This side failed to send one of the stream's frames (e.g. headers over the peer's limit). */
  frameError: boolean;
}

/**
 * Why a stream closed without a complete answer. Provably unsent (retried on
 * a new session): the stream never got an id, the server refused it, or the
 * server's GOAWAY named a last stream below it. Any other failure of the
 * session is UNAVAILABLE, never internal: the connection failed, which says
 * nothing about the request; so is a stream the server cancelled. Any other
 * reset on a live session keeps connect-node's mapping of the reset code.
 */
export function streamFailure({ stream, session, state, frameError }: StreamOutcome, reason?: unknown): ConnectError {
  const id = stream.id;
  const { goaway } = state;
  if (frameError) {
    return new ConnectError("the request could not be sent (HTTP/2 frame error)", Code.Internal, undefined, undefined, reason);
  }
  if (id === undefined) return notSentError("the connection failed before the request was sent", reason);
  if (stream.rstCode === NGHTTP2_REFUSED_STREAM) {
    // The retry belongs on a new session: this one finishes its streams and takes no more.
    if (!session.closed && !session.destroyed) session.close();
    return notSentError("the upstream refused the stream before processing it (REFUSED_STREAM)", reason);
  }
  if (goaway !== undefined && id > goaway.lastStreamId) {
    return notSentError(`the upstream closed the connection (GOAWAY ${h2CodeName(goaway.code)}) before this call reached it`, reason);
  }
  if (goaway !== undefined || session.destroyed) {
    const why = goaway !== undefined ? `GOAWAY ${h2CodeName(goaway.code)}` : reason instanceof Error ? reason.message : "closed";
    return new ConnectError(
      `the connection to the upstream failed during the call (${why})`,
      Code.Unavailable,
      undefined,
      undefined,
      reason,
    );
  }
  if (stream.rstCode === NGHTTP2_CANCEL) {
    // This side's own cancellations never get here: the server gave up on the call.
    return new ConnectError("the upstream cancelled the call (CANCEL)", Code.Unavailable, undefined, undefined, reason);
  }
  if (reason !== undefined) return errorFromNodeReason(reason);
  return (
    errorFromResetCode(stream.rstCode) ??
    new ConnectError(`http/2 stream closed with error code ${h2CodeName(stream.rstCode ?? 0)}`, Code.Internal)
  );
}
