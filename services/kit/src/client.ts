import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { internalRpcFastPath } from "./fast-path.ts";
import { fromStockTransportFailure, isSafeToRetry } from "./h2-errors.ts";
import { createSessionManager } from "./h2-sessions.ts";
import { internalCredentialInterceptor } from "./internal-auth.ts";
import { clientTracingInterceptor } from "./telemetry.ts";
import { createUnaryTransport } from "./unary-transport.ts";

export interface InternalClientOptions {
  /** Shared secret for internal credentials. */
  secret: string;
  /** Name of the calling service, recorded by the callee. */
  caller: string;
  /** How often a unary call that provably never reached the server is sent again (default 2). */
  retries?: number;
  /** Unary calls through unary-transport.ts (true) or connect-node's transport; default from INTERNAL_RPC_FAST_PATH. */
  fastPath?: boolean;
  /** Deadline of a unary call whose caller set none (default DEFAULT_UNARY_TIMEOUT_MS). */
  defaultTimeoutMs?: number;
  /** Keepalive and idle-verification interval of the session (default PING_INTERVAL_MS, 10 s). */
  pingIntervalMs?: number;
  /** The local address the connection is made from (default: the kernel's choice). */
  localAddress?: string;
}

/**
 * Sends a unary call again only when it provably never reached a handler
 * (isSafeToRetry: no connection, a refused stream, above the server's
 * GOAWAY): any other failure may have followed work the server did, and a
 * second run could do it twice. An UNAVAILABLE answered by the server is not
 * resent either.
 */
function retryUnsent(retries: number): Interceptor {
  return (next) => async (req) => {
    if (req.stream) return await next(req);
    for (let attempt = 0; ; attempt++) {
      try {
        return await next(req);
      } catch (err) {
        if (!isSafeToRetry(err) || attempt >= retries || req.signal.aborted) throw err;
        await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      }
    }
  };
}

/** connect-node's unary failures in the terms unary-transport.ts reports them (see fromStockTransportFailure). */
const stockTransportFailures: Interceptor = (next) => async (req) => {
  if (req.stream) return await next(req);
  try {
    return await next(req);
  } catch (err) {
    throw fromStockTransportFailure(err, req.signal.aborted);
  }
};

/**
 * The deadline of a unary internal call that names none: no call waits for
 * ever (issue #26), and the callee learns it (Connect-Timeout-Ms) and gives
 * up too. Far above what any of our calls takes; streams (the revocation
 * feed) live as long as their caller wants and get none.
 */
export const DEFAULT_UNARY_TIMEOUT_MS = 30_000;

function withDefaultDeadline(transport: Transport, defaultTimeoutMs: number): Transport {
  return {
    stream: (...args) => transport.stream(...args),
    unary: (method, signal, timeoutMs, ...rest) => transport.unary(method, signal, timeoutMs ?? defaultTimeoutMs, ...rest),
  };
}

/**
 * A client for an internal service over one HTTP/2 connection (Connect
 * protocol, binary), carrying internal credentials and trace context. Build it
 * once per process and share it. Unary calls take the lean transport of
 * unary-transport.ts, streams connect-node's, on the same session; with
 * INTERNAL_RPC_FAST_PATH=0 connect-node's transport carries both.
 */
export function createInternalClient<S extends DescService>(service: S, baseUrl: string, opts: InternalClientOptions): Client<S> {
  const fastPath = opts.fastPath ?? internalRpcFastPath();
  const interceptors = [
    retryUnsent(opts.retries ?? 2),
    clientTracingInterceptor(),
    internalCredentialInterceptor(opts.secret, opts.caller),
    ...(fastPath ? [] : [stockTransportFailures]),
  ];
  const sessionManager = createSessionManager(baseUrl, opts.pingIntervalMs, opts.localAddress);
  const streams = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, sessionManager, interceptors });
  const transport = fastPath ? createUnaryTransport({ baseUrl, sessionManager, streams, interceptors }) : streams;
  return createClient(service, withDefaultDeadline(transport, opts.defaultTimeoutMs ?? DEFAULT_UNARY_TIMEOUT_MS));
}
