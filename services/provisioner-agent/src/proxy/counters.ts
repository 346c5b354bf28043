/**
 * The proxy's contract with the rest of the agent: what it serves and what
 * it counts (the sampler reads `counters`). Implemented by the kernel
 * (nft-meter.ts, nftables DNAT and counters) or in the agent's process
 * (connection-proxy.ts); meter.ts picks one.
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
  /**
   * The database whose counters and trusted sources the port uses when it is not the served id's
   * own: a pooler's port (served as `<db>-pooler`) counts and admits as its database.
   */
  account?: string;
}

/**
 * The agent's connection proxy: serves each running database's published
 * port and forwards every connection to the instance's private address,
 * bytes untouched (it holds no keys; TLS is between client and server),
 * counting them each way per database. The instances run in processes of
 * their own: an agent crash never takes them down. With the in-process proxy
 * it drops the proxied connections (clients reconnect once the agent is
 * back); with the nftables meter the kernel keeps forwarding and counting.
 */
export interface ConnectionProxy {
  /**
   * Where the connections it forwards reach the servers from, when that is all they can be told by: the userspace
   * proxy's own address (connection-proxy.ts), which the servers' pg_hba then admits customers from alone.
   * Undefined when the clients' own addresses arrive (the nftables meter's DNAT), whose guard is in the kernel.
   */
  readonly sourceAddress?: string;
  /** Accepts connections on `route.port` for `id` (replacing another route of it); rejects if the port is taken. */
  serve(id: string, route: ProxyRoute): Promise<void>;
  /**
   * Stops accepting for `id`: its port refuses new connections once this
   * resolves. The proxy also ends the established ones; under the nftables
   * meter they end when the server stops (which follows every unserve).
   */
  unserve(id: string): Promise<void>;
  /** The port `id` is served on, if it is. */
  servedPort(id: string): number | undefined;
  /**
   * Cumulative bytes of each of `ids` since its epoch, read at once (the
   * sampler's round asks for all its databases in one call); a database the
   * proxy has never counted is missing from the map.
   */
  counters(ids: readonly string[]): Promise<Map<string, ProxyCounters>>;
  /**
   * The sources `database`'s ports (its own and those accounted to it) admit from now on: normalized
   * CIDRs (proxy/trust.ts); empty admits every address. Applied before this resolves, to ports served
   * later too; a connection already established stays.
   */
  trust(database: string, cidrs: readonly string[]): Promise<void>;
  /** Puts the trusted sources back as they were last given, whatever changed them (the kernel's rules). */
  repairTrust(): Promise<void>;
  /** A purged database: unserve, and remove its counters. */
  forget(id: string): Promise<void>;
  /** Stops serving everything and closes the counters cleanly (agent shutdown); `counters` still answers, `serve` no more. */
  close(): Promise<void>;
}
