import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import type { Logger } from "@dbaas/kit";

/**
 * Tells every gateway, through every identity replica, that principals it may
 * have cached are stale: a member removed or their role changed, an API key
 * revoked, an organization's plan changed or the organization deleted.
 *
 * A revocation is a PostgreSQL NOTIFY issued inside the transaction that makes
 * the change, so it is heard exactly when (and only if) the change commits.
 * Each replica LISTENs on one connection and fans what it hears out to its
 * WatchRevocations streams. While that connection is down a replica holds no
 * streams at all: a gateway without a stream trusts nothing it cached, so a
 * notification lost with the connection can never leave a stale principal in use.
 *
 * With several replicas, a gateway may hold its stream on another replica than
 * the one that made the change. Each replica's listener therefore names itself
 * in `application_name` once it LISTENs (so `pg_stat_activity` lists the
 * replicas that will hear a revocation), and a replica that hears a revocation
 * another one published tells it (a NOTIFY on the acknowledgements channel)
 * once its own streams acknowledged it or were cut for not doing so. The
 * publishing replica's `delivered` waits for those peers too.
 */
export interface Revocation {
  organizationId: string;
  userId: string;
  credentialId: string;
}

type Queryable = Pick<pg.PoolClient, "query">;

/** A revocation as one subscription numbers it: the subscriber acknowledges `seq` once applied. */
export interface Numbered {
  revocation: Revocation;
  seq: number;
}

export type SubscriptionEvent = Numbered | "idle" | "closed" | "aborted";

export interface Subscription {
  /** Names the subscription in acknowledgements. */
  readonly id: string;
  /**
   * The next revocation; "idle" when none came within `idleMs`, "closed" when
   * the feed broke (the subscriber must assume it missed something), "aborted"
   * when `signal` fired.
   */
  next(idleMs: number, signal: AbortSignal): Promise<SubscriptionEvent>;
  close(): void;
}

export interface RevocationHub {
  /** Issues the revocation in `db`'s transaction; returns an id to pass to `delivered` after commit. */
  publish(db: Queryable, revocation: Partial<Revocation>): Promise<string>;
  /**
   * Resolves once this replica's listener has heard the committed revocations
   * and every stream it handed them to has acknowledged them (AckRevocation)
   * — or has been closed for not acknowledging within ACK_WAIT_MS, which makes
   * its gateway stop trusting its cache — and every other replica listening
   * when they were published has said the same of its own streams (or is gone,
   * or PEER_WAIT_MS passed). At once while the feed is down: then there are no
   * streams to tell. Bounded by timeouts, never rejects.
   */
  delivered(ids: string[]): Promise<void>;
  /** A subscriber has applied every revocation of its subscription up to `seq`. */
  ack(subscriptionId: string, seq: number): void;
  /** A new subscriber, or undefined while the feed is down. */
  subscribe(): Subscription | undefined;
  readonly live: boolean;
  start(): Promise<void>;
  close(): Promise<void>;
}

const DELIVERY_WAIT_MS = 2_000;
/** How long an entry of a revocation whose call never asked after it (rolled back) is kept. */
const FORGET_AFTER_MS = 30_000;
/** How long a revoking call waits for a gateway to acknowledge before cutting that gateway's stream. */
const ACK_WAIT_MS = 1_000;
/**
 * How long a revoking call waits for the other replicas' word: theirs cut a
 * gateway that does not acknowledge within ACK_WAIT_MS, so only a replica that
 * hangs (or dies without its connection closing yet) makes a call wait this long.
 */
const PEER_WAIT_MS = 2 * ACK_WAIT_MS + 1_000;
/** While waiting for peers, how often `pg_stat_activity` is asked whether they still listen. */
const PEER_POLL_MS = 250;
const MAX_RECONNECT_DELAY_MS = 5_000;
const PING_INTERVAL_MS = 10_000;
const PING_TIMEOUT_MS = 5_000;

class Queue implements Subscription {
  readonly id = randomUUID();
  private items: Array<Numbered | "closed"> = [];
  private wake: (() => void) | undefined;
  private pushed = 0;
  private acked = 0;
  private ended = false;
  private ackWaiters: Array<{ seq: number; settle: (acked: boolean) => void }> = [];
  constructor(private readonly onClose: (q: Queue) => void) {}

  /** Queues a revocation; returns its number in this subscription. */
  push(item: Revocation | "closed"): number {
    if (item === "closed") {
      this.items.push(item);
    } else {
      this.items.push({ revocation: item, seq: ++this.pushed });
    }
    this.wake?.();
    return this.pushed;
  }

  ack(seq: number): void {
    if (seq <= this.acked) return;
    this.acked = Math.min(seq, this.pushed);
    this.ackWaiters = this.ackWaiters.filter((w) => {
      if (w.seq > this.acked) return true;
      w.settle(true);
      return false;
    });
  }

  /** Whether the subscriber acknowledged `seq` within `timeoutMs` (false once the subscription ended). */
  acknowledged(seq: number, timeoutMs: number): Promise<boolean> {
    if (seq <= this.acked) return Promise.resolve(true);
    if (this.ended) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => settle(false), timeoutMs);
      timer.unref();
      const waiter = { seq, settle };
      this.ackWaiters.push(waiter);
      const self = this;
      function settle(acked: boolean) {
        clearTimeout(timer);
        self.ackWaiters = self.ackWaiters.filter((w) => w !== waiter);
        resolve(acked);
      }
    });
  }

  async next(idleMs: number, signal: AbortSignal): Promise<SubscriptionEvent> {
    if (this.items.length === 0) {
      if (signal.aborted) return "aborted";
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, idleMs);
        signal.addEventListener("abort", done, { once: true });
        this.wake = done;
        function done() {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          resolve();
        }
      });
      this.wake = undefined;
    }
    const item = this.items.shift();
    if (item !== undefined) return item;
    return signal.aborted ? "aborted" : "idle";
  }

  close(): void {
    this.ended = true;
    for (const w of [...this.ackWaiters]) w.settle(false);
    this.onClose(this);
  }
}

function parseAck(payload: string | undefined): { id: string; replica: string } | undefined {
  try {
    const p = JSON.parse(payload ?? "") as Record<string, unknown>;
    return typeof p.id === "string" && typeof p.replica === "string" ? { id: p.id, replica: p.replica } : undefined;
  } catch {
    return undefined;
  }
}

function parse(payload: string | undefined): { id: string; revocation: Revocation } | undefined {
  try {
    const p = JSON.parse(payload ?? "") as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === "string" ? v : "");
    return {
      id: str(p.id),
      revocation: { organizationId: str(p.organization_id), userId: str(p.user_id), credentialId: str(p.credential_id) },
    };
  } catch {
    return undefined;
  }
}

export function createRevocationHub(databaseUrl: string, schema: string, log: Logger): RevocationHub {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name "${schema}"`);
  // Channels are per database, not per schema: two deployments sharing a database must not hear each other.
  const channel = `${schema}.revocations`;
  /** Where a replica says that its streams applied a revocation another replica published. */
  const ackChannel = `${schema}.revocation_acks`;
  /** This replica, as its listener names itself once it LISTENs (application_name: at most 63 bytes, the id first). */
  const replica = randomBytes(8).toString("hex");
  const listenerName = (id: string) => `${id}:revocations:${schema}`.slice(0, 63);
  /** The replicas (other than this one) whose listeners LISTEN now. */
  const listeningPeers = async (db: Queryable): Promise<Set<string>> => {
    const { rows } = await db.query<{ name: string }>(
      "SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%:revocations:%'",
    );
    const peers = new Set<string>();
    for (const { name } of rows) {
      const id = name.split(":")[0]!;
      // Another deployment's replicas (another schema) share the database, not the channel.
      if (id !== replica && name === listenerName(id)) peers.add(id);
    }
    return peers;
  };
  /** Per revocation published here while other replicas listened: those that have not yet said their streams applied it. */
  const peerWaits = new Map<string, { pending: Set<string>; done: Promise<void>; release: () => void }>();
  const subscribers = new Map<string, Queue>();
  /** Per revocation published here: heard by the listener, and which subscriber got it under which number. */
  const waiters = new Map<string, { heard: Promise<void>; release: () => void; handed: Array<[Queue, number]> }>();
  let listener: pg.Client | undefined;
  let live = false;
  let closed = false;
  let failures = 0;
  let reconnectTimer: NodeJS.Timeout | undefined;

  const releaseWaiters = () => {
    for (const waiter of waiters.values()) waiter.release();
  };

  /** Our streams' acknowledgements of a revocation published elsewhere (a stream that does not ack is cut), then the publisher is told. */
  const confirmToPublisher = async (client: pg.Client, id: string, handed: Array<[Queue, number]>) => {
    await Promise.all(
      handed.map(async ([sub, seq]) => {
        if (!(await sub.acknowledged(seq, ACK_WAIT_MS))) sub.push("closed");
      }),
    );
    if (listener !== client) return; // our feed went down meanwhile: our streams are closed, the publisher stops waiting for us.
    await client.query("SELECT pg_notify($1, $2)", [ackChannel, JSON.stringify({ id, replica })]).catch(() => {});
  };

  /** Until every peer of the revocation confirmed, left, or PEER_WAIT_MS passed. */
  const awaitPeers = async (id: string) => {
    const wait = peerWaits.get(id);
    if (!wait) return;
    const deadline = Date.now() + PEER_WAIT_MS;
    try {
      while (wait.pending.size > 0 && Date.now() < deadline) {
        const tick = new Promise((r) => setTimeout(r, PEER_POLL_MS).unref());
        await Promise.race([wait.done, tick]);
        if (wait.pending.size === 0) break;
        // A replica that died (its listener's connection gone) will not answer: stop waiting for it.
        const client = listener;
        if (!client) break;
        const still = await listeningPeers(client).catch(() => undefined);
        if (still) for (const peer of [...wait.pending]) if (!still.has(peer)) wait.pending.delete(peer);
      }
    } finally {
      peerWaits.delete(id);
    }
  };

  const goDown = (reason: unknown) => {
    if (!live && listener === undefined) return;
    const wasLive = live;
    live = false;
    const client = listener;
    listener = undefined;
    client?.removeAllListeners();
    client?.on("error", () => {});
    void client?.end().catch(() => {});
    for (const sub of subscribers.values()) sub.push("closed");
    subscribers.clear();
    releaseWaiters();
    if (wasLive) log.warn("revocation feed down; streams closed until it is back", { error: reason });
    if (!closed) scheduleReconnect();
  };

  const scheduleReconnect = () => {
    if (reconnectTimer) return;
    const delay = Math.min(200 * 2 ** failures, MAX_RECONNECT_DELAY_MS);
    failures++;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      void connect();
    }, delay);
    reconnectTimer.unref();
  };

  const connect = async (): Promise<void> => {
    if (closed) return;
    // A LISTEN connection is otherwise silent: keepalives and a periodic ping notice a dead one.
    const client = new pg.Client({ connectionString: databaseUrl, keepAlive: true, query_timeout: PING_TIMEOUT_MS });
    listener = client;
    client.on("error", (err) => goDown(err));
    client.on("end", () => goDown("connection ended"));
    client.on("notification", (msg) => {
      if (msg.channel === ackChannel) {
        const ack = parseAck(msg.payload);
        const wait = ack && peerWaits.get(ack.id);
        if (wait && ack) {
          wait.pending.delete(ack.replica);
          if (wait.pending.size === 0) wait.release();
        }
        return;
      }
      if (msg.channel !== channel) return;
      const parsed = parse(msg.payload);
      if (!parsed) return;
      const waiter = waiters.get(parsed.id);
      const handed: Array<[Queue, number]> = [];
      for (const sub of subscribers.values()) {
        const seq = sub.push(parsed.revocation);
        handed.push([sub, seq]);
        waiter?.handed.push([sub, seq]);
      }
      waiter?.release();
      // Published by another replica (or by this one before its feed was live): tell it once our streams applied it.
      if (!waiter) void confirmToPublisher(client, parsed.id, handed);
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${channel}"`);
      await client.query(`LISTEN "${ackChannel}"`);
      // Named only now: a replica listed in pg_stat_activity hears every revocation committed from here on.
      await client.query("SELECT set_config('application_name', $1, false)", [listenerName(replica)]);
      if (closed || listener !== client) {
        await client.end().catch(() => {});
        return;
      }
      live = true;
      if (failures > 0) log.info("revocation feed back");
      failures = 0;
      const ping = setInterval(() => {
        if (listener !== client) return clearInterval(ping);
        client.query("SELECT 1").catch((err: unknown) => listener === client && goDown(err));
      }, PING_INTERVAL_MS);
      ping.unref();
    } catch (err) {
      if (listener === client) goDown(err);
      if (failures === 1) log.warn("revocation feed cannot listen yet; retrying", { error: err });
    }
  };

  return {
    get live() {
      return live;
    },
    async publish(db, revocation) {
      const id = randomUUID();
      const payload = JSON.stringify({
        id,
        organization_id: revocation.organizationId ?? "",
        user_id: revocation.userId ?? "",
        credential_id: revocation.credentialId ?? "",
      });
      // Registered before commit: the listener may hear it before the committing call returns.
      // A rolled-back transaction's entry is dropped by the timer.
      // Heard or not, the entry stays until `delivered` takes it (the listener may hear the
      // notification before the committing call asks), or, for a rolled-back transaction
      // whose call never asks, until FORGET_AFTER_MS.
      if (live) {
        // The replicas that will hear it: their streams must apply it before the revoking call answers, as ours must.
        const peers = await listeningPeers(db);
        if (peers.size > 0) {
          let releasePeers!: () => void;
          const done = new Promise<void>((resolve) => (releasePeers = resolve));
          peerWaits.set(id, { pending: peers, done, release: releasePeers });
          setTimeout(() => peerWaits.delete(id), FORGET_AFTER_MS).unref();
        }
        let release!: () => void;
        const heard = new Promise<void>((resolve) => (release = resolve));
        const timer = setTimeout(release, DELIVERY_WAIT_MS);
        timer.unref();
        const forget = setTimeout(() => waiters.delete(id), FORGET_AFTER_MS);
        forget.unref();
        waiters.set(id, {
          heard,
          handed: [],
          release: () => {
            clearTimeout(timer);
            release();
          },
        });
      }
      await db.query("SELECT pg_notify($1, $2)", [channel, payload]);
      return id;
    },
    async delivered(ids) {
      const pending = ids.map((id) => waiters.get(id)).filter((w) => w !== undefined);
      // The listener finds the entry by id until it has heard the revocation; then it is done with.
      await Promise.all(pending.map((w) => w.heard));
      for (const id of ids) waiters.delete(id);
      await Promise.all(
        pending.flatMap((w) =>
          w.handed.map(async ([sub, seq]) => {
            // A gateway that does not confirm in time loses its stream, and with it its trust in its cache.
            if (!(await sub.acknowledged(seq, ACK_WAIT_MS))) sub.push("closed");
          }),
        ),
      );
      await Promise.all(ids.map(awaitPeers));
    },
    ack(subscriptionId, seq) {
      subscribers.get(subscriptionId)?.ack(seq);
    },
    subscribe() {
      if (!live) return undefined;
      const q = new Queue((sub) => subscribers.delete(sub.id));
      subscribers.set(q.id, q);
      return q;
    },
    start: connect,
    async close() {
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const client = listener;
      listener = undefined;
      live = false;
      for (const sub of subscribers.values()) sub.push("closed");
      subscribers.clear();
      releaseWaiters();
      client?.removeAllListeners();
      client?.on("error", () => {});
      await client?.end().catch(() => {});
    },
  };
}
