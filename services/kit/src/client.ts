import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { internalCredentialInterceptor } from "./internal-auth.ts";
import { clientTracingInterceptor } from "./telemetry.ts";

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
 * once per process and share it.
 */
export function createInternalClient<S extends DescService>(
  service: S,
  baseUrl: string,
  opts: InternalClientOptions,
): Client<S> {
  const transport = createConnectTransport({
    baseUrl,
    httpVersion: "2",
    useBinaryFormat: true,
    pingIntervalMs: 10_000,
    interceptors: [
      retryUnavailable(opts.retries ?? 2),
      clientTracingInterceptor(),
      internalCredentialInterceptor(opts.secret, opts.caller),
    ],
  });
  return createClient(service, transport);
}
