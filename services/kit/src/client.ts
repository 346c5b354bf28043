import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { internalRpcFastPath } from "./fast-path.ts";
import { fromStockTransportFailure, isSafeToRetry } from "./h2-errors.ts";
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
  const sessionManager = new Http2SessionManager(baseUrl, { pingIntervalMs: 10_000 });
  const streams = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, sessionManager, interceptors });
  return createClient(service, fastPath ? createUnaryTransport({ baseUrl, sessionManager, streams, interceptors }) : streams);
}
