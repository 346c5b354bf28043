/**
 * The proxy's contract with the rest of the agent: what it serves and what
 * it counts (the sampler reads `counters`). Implemented by connection-proxy.ts.
 */

/**
 * A database's proxied bytes, cumulative since `epoch` began. A sample
 * carries all three; billing takes deltas between samples of one epoch, so a
 * resent sample counts nothing twice. The epoch changes only when the
 * persisted counters were lost (file missing or damaged, or a host crash may
 * have dropped its last writes); the new epoch starts at zero.
 */
export interface ProxyCounters {
  epoch: string;
  /** Client → database: every byte the proxy received from clients. */
  bytesIn: bigint;
  /** Database → client: every byte the proxy received from the database for its clients. */
  bytesOut: bigint;
}

/** A database's published port and the private address its server listens on. */
export interface ProxyRoute {
  /** The published port (what clients use), on the agent's listen address. */
  port: number;
  /** The instance's private TCP address (loopback). */
  target: { host: string; port: number };
}

/**
 * The agent's connection proxy: serves each running database's published
 * port and forwards every connection to the instance's private address,
 * bytes untouched (it holds no keys; TLS is between client and server),
 * counting them each way per database. It runs in the agent's process, the
 * instances in their own: an agent crash drops the proxied connections, not
 * the instances, and clients reconnect once the agent is back.
 */
export interface ConnectionProxy {
  /** Accepts connections on `route.port` for `id` (replacing another route of it); rejects if the port is taken. */
  serve(id: string, route: ProxyRoute): Promise<void>;
  /** Stops accepting for `id` and ends its connections: its port refuses once this resolves. */
  unserve(id: string): Promise<void>;
  /** The port `id` is served on, if it is. */
  servedPort(id: string): number | undefined;
  /** Cumulative bytes of `id` since its epoch; undefined if the proxy has never counted it. */
  counters(id: string): ProxyCounters | undefined;
  /** A purged database: unserve, and remove its counters. */
  forget(id: string): Promise<void>;
  /** Stops serving everything and closes the counters cleanly (agent shutdown); `counters` still answers, `serve` no more. */
  close(): Promise<void>;
}
