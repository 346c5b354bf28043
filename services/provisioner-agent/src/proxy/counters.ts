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
 * A server on this host as the guard of private ports sees it (nftables meter): its uid, its own private address
 * and port, and where it streams from.
 */
export interface LocalServer {
  /** The server's uid (its OS user: AGENT_TENANT_UID_RANGE, or the agent's in the shared-uid fallback). */
  uid: number;
  /** Its private address and port: guarded while it runs, served or not (an HA standby's is never served). */
  own: { host: string; port: number };
  /** The private address and port of the primary it streams from (a replica, an HA standby), when it streams. */
  streamsFrom?: { host: string; port: number };
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
  /**
   * The guard of private ports, per port (nftables meter; the userspace proxy guards by its source address and
   * ignores this): instance `id`'s server runs as `server.uid` on `server.own`, which then takes on this host
   * only what came through a published port, the agent's connections and those of the uids given for it — its
   * own, and those of the servers that stream from it; `server.streamsFrom` lets its uid reach that private
   * port (its primary's, this agent's or another agent's of this host). Undefined: the server is stopped or
   * gone. Applied in one transaction before this resolves.
   */
  guardLocal(id: string, server: LocalServer | undefined): Promise<void>;
  /**
   * Puts the trusted sources and the guard of private ports back as they were last given, whatever changed
   * them (the kernel's rules).
   */
  repairTrust(): Promise<void>;
  /** A purged database: unserve, forget its guard entries, and remove its counters. */
  forget(id: string): Promise<void>;
  /** Stops serving everything and closes the counters cleanly (agent shutdown); `counters` still answers, `serve` no more. */
  close(): Promise<void>;
}
