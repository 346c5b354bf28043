import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { internalCredentialInterceptor } from "./internal-auth.ts";
import { clientTracingInterceptor } from "./telemetry.ts";
import { createUnaryTransport } from "./unary-transport.ts";

export interface InternalClientOptions {
  /** Shared secret for internal credentials. */
  secret: string;
  /** Name of the calling service, recorded by the callee. */
  caller: string;
  /** How often a unary call failing with UNAVAILABLE is retried (default 2). */
  retries?: number;
}

/** Retries unary calls that failed with UNAVAILABLE only: the call never reached a handler. */
function retryUnavailable(retries: number): Interceptor {
  return (next) => async (req) => {
    if (req.stream) return await next(req);
    for (let attempt = 0; ; attempt++) {
      try {
        return await next(req);
      } catch (err) {
        const ce = ConnectError.from(err);
        if (ce.code !== Code.Unavailable || attempt >= retries || req.signal.aborted) throw err;
        await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      }
    }
  };
}

/**
 * A client for an internal service over one HTTP/2 connection (Connect
 * protocol, binary), carrying internal credentials and trace context. Build it
 * once per process and share it. Unary calls take the lean transport of
 * unary-transport.ts, streams connect-node's, on the same session.
 */
export function createInternalClient<S extends DescService>(
  service: S,
  baseUrl: string,
  opts: InternalClientOptions,
): Client<S> {
  const interceptors = [
    retryUnavailable(opts.retries ?? 2),
    clientTracingInterceptor(),
    internalCredentialInterceptor(opts.secret, opts.caller),
  ];
  const sessionManager = new Http2SessionManager(baseUrl, { pingIntervalMs: 10_000 });
  const streams = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, sessionManager, interceptors });
  return createClient(service, createUnaryTransport({ baseUrl, sessionManager, streams, interceptors }));
}
