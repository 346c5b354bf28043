import { setMaxListeners } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip, connectNodeAdapter } from "@connectrpc/connect-node";
import { listenCleartext } from "./cleartext-listener.ts";
import { handlersNeverUnavailable } from "./errors.ts";
import { internalRpcFastPath } from "./fast-path.ts";
import { requireInternalAuth } from "./internal-auth.ts";
import type { Logger } from "./logger.ts";
import { answerMetrics, rpcMetricsInterceptor, type Registry } from "./prometheus.ts";
import { serverTracingInterceptor } from "./telemetry.ts";
import { textGuardInterceptor } from "./text-guard.ts";
import { createUnaryFastPath } from "./unary-server.ts";

export interface ServerOptions {
  port: number;
  /** Interface to bind; defaults to HOST from the environment, else 127.0.0.1 (containers set HOST=0.0.0.0). */
  host?: string;
  routes: (router: ConnectRouter) => void;
  /** Secret every caller's internal credential must be signed with. */
  internalSecret: string;
  log: Logger;
  /** Reported by GET /healthz (no credential needed: for load balancers and the stack runner). */
  health?: () => Promise<Record<string, unknown>>;
  /** The process's registry (createMetricsRegistry): every RPC is measured on it, and GET /metrics serves it. */
  metrics?: Registry;
  interceptors?: Interceptor[];
  /** Largest request message accepted, in bytes (connect's default, ~4 GiB, when unset). */
  readMaxBytes?: number;
  /** Binary Connect unary calls through unary-server.ts (true) or connect-node; default from INTERNAL_RPC_FAST_PATH. */
  fastPath?: boolean;
}

export interface RunningServer {
  port: number;
  url: string;
  /** Aborted when the server starts shutting down: long-lived streams should end. */
  shutdownSignal: AbortSignal;
  close(): Promise<void>;
}

/**
 * Serves Connect routes over cleartext HTTP/2, so the same port speaks Connect,
 * gRPC and gRPC-Web. Binary Connect unary calls — nearly all internal traffic —
 * take the lean path of unary-server.ts; everything else goes through
 * connect-node. A request holding NUL in any string is refused before its
 * handler runs (textGuardInterceptor); a unary handler never answers
 * UNAVAILABLE (handlersNeverUnavailable). `close()` refuses new calls, ends
 * streams, lets in-flight unary calls finish (up to 5 s) and then drops what
 * is left. INTERNAL_RPC_FAST_PATH=0 (or `fastPath: false`) leaves every call
 * to connect-node. HTTP/1.1 connections on the same port get /healthz and
 * /metrics only (cleartext-listener.ts).
 */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const host = opts.host ?? (process.env.HOST || "127.0.0.1");
  const shutdown = new AbortController();
  // Every long-running loop of the service (an agent has a dozen: the watch, heartbeats, samples, leases,
  // poolers, trusted sources, backups…) listens on this one signal; Node warns past 10 as if it leaked.
  setMaxListeners(100, shutdown.signal);
  const interceptors = [
    // Outermost: a call refused by auth or the text guard is counted too.
    ...(opts.metrics ? [rpcMetricsInterceptor(opts.metrics)] : []),
    serverTracingInterceptor(),
    requireInternalAuth(opts.internalSecret),
    textGuardInterceptor(),
    ...(opts.interceptors ?? []),
    // Innermost: only what the handler itself threw. An outer interceptor may still answer UNAVAILABLE
    // for a call that did not get to do anything (e.g. databaseOutage: PostgreSQL not reachable).
    handlersNeverUnavailable((err) => opts.log.error("a handler failed with UNAVAILABLE; answered as a failed dependency", { error: err })),
  ];
  const acceptCompression = [compressionGzip, compressionBrotli];
  const plain = plainEndpoints(opts);
  const fastPath =
    (opts.fastPath ?? internalRpcFastPath())
      ? createUnaryFastPath({
          interceptors,
          shutdownSignal: shutdown.signal,
          acceptCompression,
          readMaxBytes: opts.readMaxBytes,
          onAnswerFailed: (message, reason) => opts.log.error(message, { error: reason }),
        })
      : undefined;
  const handler = connectNodeAdapter({
    routes: fastPath ? fastPath.record(opts.routes) : opts.routes,
    interceptors,
    acceptCompression,
    readMaxBytes: opts.readMaxBytes,
    shutdownSignal: shutdown.signal,
    fallback: plain,
  });
  const server = http2.createServer(handler);
  if (fastPath) takeStreamsFirst(server, fastPath.serve);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  const listener = listenCleartext(server, plain);
  await new Promise<void>((resolve, reject) => {
    listener.server.once("error", reject);
    listener.server.listen(opts.port, host, () => resolve());
  });
  const port = (listener.server.address() as AddressInfo).port;
  opts.log.info("listening", { port });
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`,
    shutdownSignal: shutdown.signal,
    close() {
      closing ??= new Promise<void>((resolve) => {
        shutdown.abort();
        listener.close(() => resolve());
        for (const s of sessions) s.close();
        // A peer that never finishes its streams must not hold shutdown hostage.
        setTimeout(() => {
          for (const s of sessions) s.destroy();
          resolve();
        }, 5_000).unref();
      });
      return closing;
    },
  };
}

/**
 * What the port answers besides RPCs, over HTTP/2 and HTTP/1.1 alike, without
 * a credential: GET /healthz (load balancers, the stack runner) and, with a
 * registry, GET /metrics (Prometheus text exposition). Anything else is 404.
 */
function plainEndpoints(opts: ServerOptions): PlainHandler {
  return (req, res) => {
    if (req.method === "GET" && req.url === "/healthz") {
      const check = opts.health ? opts.health() : Promise.resolve({});
      check.then(
        (detail) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ status: "ok", ...detail }));
        },
        (err: unknown) => {
          res.writeHead(503, { "content-type": "application/json" });
          res.end(JSON.stringify({ status: "unavailable", error: (err as Error).message }));
        },
      );
      return;
    }
    if (req.method === "GET" && req.url === "/metrics" && opts.metrics) {
      answerMetrics(opts.metrics, res);
      return;
    }
    res.writeHead(404);
    res.end();
  };
}

type PlainHandler = NonNullable<Parameters<typeof connectNodeAdapter>[0]["fallback"]>;

/**
 * Puts `serve` in front of Node's http2 compat layer: a stream it takes never
 * costs a compat request/response pair; any other is handed to the compat
 * listener Node attached for the request handler, so those requests see
 * exactly what they saw before (including Node's CONNECT and Expect handling).
 */
function takeStreamsFirst(
  server: http2.Http2Server,
  serve: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean,
): void {
  const compat = server.listeners("stream");
  if (compat.length !== 1) throw new Error("expected exactly Node's http2 compat listener on 'stream'");
  const toCompat = compat[0] as (...args: unknown[]) => void;
  server.removeListener("stream", toCompat);
  server.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    if (!serve(stream, headers)) toCompat(stream, headers, flags, rawHeaders);
  });
}

/**
 * Runs `hooks` in reverse registration order on SIGTERM/SIGINT, then exits.
 * A second signal exits at once.
 */
export function onShutdown(log: Logger, ...hooks: Array<() => Promise<unknown> | unknown>): void {
  let stopping = false;
  const run = async (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info("shutting down", { signal });
    for (const [i, hook] of [...hooks].reverse().entries()) {
      try {
        await hook();
        if (process.env.DEBUG_SHUTDOWN) log.info("shutdown step done", { step: i });
      } catch (err) {
        log.error("shutdown hook failed", { error: err });
      }
    }
    process.exit(0);
  };
  process.on("SIGTERM", () => void run("SIGTERM"));
  process.on("SIGINT", () => void run("SIGINT"));
}
